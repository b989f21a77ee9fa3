// Package config holds the tests of the kustomize manifests: they build with
// the kubectl that hack/envtest-assets.sh builds, and the RBAC they grant is
// the least the manager needs.
package config

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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
		"CustomResourceDefinition/agentruns.agentrun.dev", "Namespace/agentrun-system", "ServiceAccount/agentrun-manager",
		"ClusterRole/agentrun-manager", "ClusterRoleBinding/agentrun-manager", "Role/agentrun-leader-election",
		"RoleBinding/agentrun-leader-election", "Deployment/agentrun-manager", "Service/agentrun-manager-metrics",
		"ClusterRole/agentrun-editor", "ClusterRole/agentrun-viewer",
	} {
		if have[want] == nil {
			t.Errorf("config/default lacks %s", want)
		}
	}
}

// TestManagerRBACIsLeast: the manager may read AgentRuns (never delete
// them: they are the runs' records) and write their status, create and
// delete Jobs, patch Pods (the harvest finalizer) and delete them (to
// cancel a run), read pods/log, and write Events; nothing else, and never
// Secrets.
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
		"agentrun.dev/agentruns":        "get,list,watch",
		"agentrun.dev/agentruns/status": "get,patch,update",
		"batch/jobs":                    "create,delete,get,list,watch",
		"/pods":                         "delete,get,list,patch,watch",
		"/pods/log":                     "get",
		"/events":                       "create,patch",
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
	for _, rt := range []string{"claude-code", "codex", "pi"} {
		if !runtimes[rt] {
			t.Errorf("no sample for %s", rt)
		}
	}
}
