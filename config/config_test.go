// Package config holds the tests of the kustomize manifests: they build with
// the kubectl that hack/envtest-assets.sh builds, and the RBAC they grant is
// the least the manager needs.
package config

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/adapters"
)

func kustomize(t *testing.T, dir string) []map[string]any {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: these tests use its kubectl; run `export KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)` (make envtest) or make test")
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	var objs []map[string]any
	for _, d := range strings.Split(string(out), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if m != nil {
			objs = append(objs, m)
		}
	}
	return objs
}

func name(o map[string]any) string { return o["metadata"].(map[string]any)["name"].(string) }

func TestDefaultBuilds(t *testing.T) {
	objs := kustomize(t, "default")
	have := map[string]map[string]any{}
	for _, o := range objs {
		have[o["kind"].(string)+"/"+name(o)] = o
	}
	for _, want := range []string{
		"CustomResourceDefinition/agentruns.agentrun.dev", "CustomResourceDefinition/agentrunpolicies.agentrun.dev",
		"CustomResourceDefinition/agentbudgets.agentrun.dev", "ClusterRole/agentrun-budget-admin",
		"Namespace/agentrun-system", "ServiceAccount/agentrun-manager",
		"ClusterRole/agentrun-manager", "ClusterRoleBinding/agentrun-manager", "Role/agentrun-leader-election",
		"RoleBinding/agentrun-leader-election", "Deployment/agentrun-manager", "Service/agentrun-manager-metrics",
		"ClusterRole/agentrun-metrics-auth", "ClusterRoleBinding/agentrun-metrics-auth", "ClusterRole/agentrun-metrics-reader",
		"ClusterRole/agentrun-editor", "ClusterRole/agentrun-viewer",
		// kustomize and Helm agree on security: the sandbox profiles'
		// guard, and the profile installer in a namespace of its own.
		"ValidatingAdmissionPolicy/agentrun-sandbox-profiles", "ValidatingAdmissionPolicyBinding/agentrun-sandbox-profiles",
		"Namespace/agentrun-node-profiles", "DaemonSet/agentrun-node-profiles",
	} {
		if have[want] == nil {
			t.Errorf("config/default lacks %s", want)
		}
	}
	// The guard lets Jobs naming the profile come from this manager only.
	sa := have["ServiceAccount/agentrun-manager"]
	manager := "system:serviceaccount:" + sa["metadata"].(map[string]any)["namespace"].(string) + ":agentrun-manager"
	if guard := have["ValidatingAdmissionPolicy/agentrun-sandbox-profiles"]; guard == nil || !strings.Contains(fmt.Sprint(guard["spec"]), "'"+manager+"'") {
		t.Errorf("the guard does not name the manager %s", manager)
	}
	if ns := have["Namespace/agentrun-node-profiles"]; ns == nil || ns["metadata"].(map[string]any)["labels"].(map[string]any)["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("the profile installer's namespace is not its own privileged one")
	}
}

// TestImagesByVersionTag: config/default runs the images of the chart's
// appVersion, as the chart does, never a moving tag such as :dev.
func TestImagesByVersionTag(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "charts", "agentrun", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	for _, o := range kustomize(t, "default") {
		if o["kind"] != "Deployment" {
			continue
		}
		c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		if c["image"] != "agentrun-manager:"+chart.AppVersion {
			t.Errorf("manager image %v, want agentrun-manager:%s", c["image"], chart.AppVersion)
		}
		found := false
		for _, a := range c["args"].([]any) {
			found = found || a == "--runner-image=agentrun-runner:"+chart.AppVersion
		}
		if !found {
			t.Errorf("manager args %v: want --runner-image=agentrun-runner:%s", c["args"], chart.AppVersion)
		}
		return
	}
	t.Fatal("no Deployment in config/default")
}

// TestManagerRBACIsLeast: the manager may read AgentRuns (never delete
// them: they are the runs' records) and write their status, create and
// delete Jobs, patch Pods (the harvest finalizer, the reason of a stop)
// and delete them (to cancel a run or stop it for its budget), read
// pods/log, write Events and list them (a Job's FailedCreate, for
// PodRejected), and read AgentBudgets and write their status; nothing
// else, and never Secrets.
func TestManagerRBACIsLeast(t *testing.T) {
	var role struct {
		Rules []struct {
			APIGroups []string `json:"apiGroups"`
			Resources []string `json:"resources"`
			Verbs     []string `json:"verbs"`
		} `json:"rules"`
	}
	b, err := os.ReadFile(filepath.Join("rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				got[g+"/"+res] = strings.Join(r.Verbs, ",")
			}
		}
	}
	want := map[string]string{
		// delete: the ended runs of namespaces that opt in to records
		// that expire (controllers/records.go), and no other.
		"agentrun.dev/agentruns": "delete,get,list,watch",
		// The run's status is written whole (an update: controllers'
		// writeStatus), never patched.
		"agentrun.dev/agentruns/status": "get,update",
		// The Namespace's opt-in annotations: get only (a Role in the
		// namespace grants it), never list or watch.
		"/namespaces": "get",
		// The Job's owner reference blocks the run's deletion
		// (blockOwnerDeletion), which clusters enforcing owner
		// references allow only to who may update the owner's
		// finalizers; the manager sets none.
		"agentrun.dev/agentruns/finalizers": "update",
		// Budgets: read, and their status kept; never their spec, which
		// is the admins'.
		"agentrun.dev/agentbudgets":        "get,list,watch",
		"agentrun.dev/agentbudgets/status": "get,patch,update",
		"batch/jobs":                       "create,delete,get,list,watch",
		"/pods":                            "delete,get,list,patch,watch",
		"/pods/log":                        "get",
		// Events: recorded (create, patch), and of the others only the Job
		// controller's refusals of a run's Pod, cached by a field
		// selector (list, watch: controllers/podrejection.go).
		"/events": "create,list,patch,watch",
		// A run's patch (spec.git): created once, read back by name.
		"/configmaps": "create,get",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: verbs %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected permission on %s (%s)", k, got[k])
		}
	}
}

// TestPolicyBuilds: config/policy is the ValidatingAdmissionPolicy, a
// binding that names it and its AgentRunPolicy, refusing when that is
// missing, and the standard AgentRunPolicy.
func TestPolicyBuilds(t *testing.T) {
	have := map[string]map[string]any{}
	for _, o := range kustomize(t, "policy") {
		have[o["kind"].(string)+"/"+name(o)] = o
	}
	if len(have) != 3 {
		t.Errorf("config/policy has %d objects: %v", len(have), have)
	}
	b := have["ValidatingAdmissionPolicyBinding/agentrun-policy"]
	if b == nil || have["ValidatingAdmissionPolicy/agentrun-policy"] == nil || have["AgentRunPolicy/agentrun-policy"] == nil {
		t.Fatalf("config/policy lacks the policy, its binding or its AgentRunPolicy: %v", have)
	}
	spec := b["spec"].(map[string]any)
	ref := spec["paramRef"].(map[string]any)
	if spec["policyName"] != "agentrun-policy" || ref["name"] != "agentrun-policy" || ref["parameterNotFoundAction"] != "Deny" {
		t.Errorf("binding %v", spec)
	}
}

func TestSamplesBuild(t *testing.T) {
	objs := kustomize(t, "samples")
	runtimes := map[string]bool{}
	for _, o := range objs {
		if o["kind"] != "AgentRun" {
			t.Errorf("unexpected %v in samples", o["kind"])
			continue
		}
		runtimes[o["spec"].(map[string]any)["runtime"].(string)] = true
	}
	for _, rt := range adapters.ImageRuntimes() {
		if !runtimes[rt] {
			t.Errorf("no sample for %s", rt)
		}
	}
}
