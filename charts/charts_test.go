// Package charts holds the tests of the Helm chart in charts/agentrun: it
// lints and renders it with the pinned helm (built from the Go module proxy
// into .cache/tools by hack/k8s-tool.sh) and checks that the chart's CRD and
// RBAC are the ones generated from the code.
package charts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// docs splits rendered YAML into objects.
func docs(t *testing.T, rendered string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range strings.Split(rendered, "\n---") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, d)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func find(objs []map[string]any, kind, nameSuffix string) map[string]any {
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && strings.HasSuffix(md["name"].(string), nameSuffix) {
			return o
		}
	}
	return nil
}

// appVersion is Chart.yaml's appVersion: the tag of both images unless a
// value names another.
func appVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "charts", "agentrun", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

func TestHelmLint(t *testing.T) {
	out := helm(t, "lint", "--strict", "charts/agentrun")
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Fatalf("helm lint:\n%s", out)
	}
}

func TestHelmTemplate(t *testing.T) {
	for _, kube := range []string{"1.31.0", "1.34.0"} {
		t.Run(kube, func(t *testing.T) {
			objs := docs(t, helm(t, "template", "ar", "charts/agentrun", "--namespace", "agentrun-system",
				"--kube-version", kube, "--set", "runner.image=runner:v9"))
			for _, want := range [][2]string{
				{"CustomResourceDefinition", "agentruns.agentrun.dev"}, {"ServiceAccount", "ar-manager"},
				{"ClusterRole", "ar-manager"}, {"ClusterRoleBinding", "ar-manager"}, {"Role", "leader-election"},
				{"Deployment", "ar-manager"}, {"Service", "ar-manager-metrics"},
				{"ClusterRole", "ar-manager-editor"}, {"ClusterRole", "ar-manager-viewer"},
			} {
				if find(objs, want[0], want[1]) == nil {
					t.Errorf("no %s %s in the rendered chart", want[0], want[1])
				}
			}
			dep := find(objs, "Deployment", "ar-manager")
			if dep == nil {
				return
			}
			b, _ := yaml.Marshal(dep)
			for _, want := range []string{"--runner-image=runner:v9", "--leader-elect=true", "readOnlyRootFilesystem: true", "runAsNonRoot: true",
				"image: agentrun-manager:" + appVersion(t)} {
				if !strings.Contains(string(b), want) {
					t.Errorf("the Deployment lacks %q", want)
				}
			}
		})
	}
}

// TestHelmRefusesOlderKubernetes: the chart's kubeVersion is the CRD's
// true minimum (api/v1alpha1 TestCRDRulesCompileOnMinimumKubernetes).
func TestHelmRefusesOlderKubernetes(t *testing.T) {
	cmd := exec.Command(helmBin(t), "template", "ar", "charts/agentrun", "--kube-version", "1.30.9")
	cmd.Dir = root(t)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "kubeVersion") {
		t.Errorf("helm template for Kubernetes 1.30: %v\n%s", err, out)
	}
}

// TestClusterValues: hack/cluster-values.yaml, with which make demo and the
// end-to-end tests install the chart on hack/cluster.sh's cluster, renders
// a manager that uses the imported images and reaches the API server on the
// node bridge (there is no kube-proxy there).
func TestClusterValues(t *testing.T) {
	objs := docs(t, helm(t, "template", "ar", "charts/agentrun", "--namespace", "agentrun-system",
		"--kube-version", "1.34.0", "-f", "hack/cluster-values.yaml"))
	dep := find(objs, "Deployment", "ar-manager")
	if dep == nil {
		t.Fatal("no manager Deployment")
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						ImagePullPolicy string            `json:"imagePullPolicy"`
						Args            []string          `json:"args"`
						Env             []json.RawMessage `json:"env"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	b, _ := yaml.Marshal(dep)
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers
	if len(c) != 1 {
		t.Fatalf("containers %d", len(c))
	}
	if c[0].ImagePullPolicy != "Never" || !slices.Contains(c[0].Args, "--runner-image-pull-policy=Never") ||
		!slices.Contains(c[0].Args, "--agent-requests=cpu=10m,memory=64Mi") {
		t.Errorf("pull policies: %s %v", c[0].ImagePullPolicy, c[0].Args)
	}
	env := map[string]string{}
	for _, raw := range c[0].Env {
		var e struct{ Name, Value string }
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		env[e.Name] = e.Value
	}
	if env["KUBERNETES_SERVICE_HOST"] != "10.200.0.1" || env["KUBERNETES_SERVICE_PORT"] != "16443" {
		t.Errorf("manager env %v: want the API server's endpoint on the node bridge", env)
	}
	// The local cluster keeps the admin policy as the chart installs it,
	// loosened only by the values the demo and the e2e tests need.
	arp := find(objs, "AgentRunPolicy", "ar-policy")
	binding := find(objs, "ValidatingAdmissionPolicyBinding", "ar-policy")
	if arp == nil || binding == nil {
		t.Fatal("the cluster values turn the admin policy off")
	}
	if sel, _ := yaml.Marshal(binding["spec"].(map[string]any)["matchResources"]); strings.TrimSpace(string(sel)) != "namespaceSelector: {}" {
		t.Errorf("the cluster values narrow the policy's namespaces: %s", sel)
	}
	spec := arp["spec"].(map[string]any)
	for k, want := range map[string]string{"allowedAddresses": "[10.200.0.1:*]", "allowedSeccompProfiles": "[unconfined localhost/agentrun/missing.json]",
		"allowSandboxNone": "false", "allowedImages": "[agentrun-runner:" + appVersion(t) + "]"} {
		if got := fmt.Sprint(spec[k]); got != want {
			t.Errorf("cluster values: %s %s, want %s", k, got, want)
		}
	}
	// The default values set no environment at all.
	plain := find(docs(t, helm(t, "template", "ar", "charts/agentrun", "--kube-version", "1.34.0")), "Deployment", "ar-manager")
	if b, _ := yaml.Marshal(plain); strings.Contains(string(b), "KUBERNETES_SERVICE_HOST") {
		t.Error("the default values point the manager somewhere")
	}
}

// TestChartMatchesGeneratedManifests: the chart carries the CRD and the
// manager's rules that controller-gen generated into config/.
func TestChartMatchesGeneratedManifests(t *testing.T) {
	r := root(t)
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(r, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(read("charts/agentrun/files/agentrun.dev_agentruns.yaml"), read("config/crd/bases/agentrun.dev_agentruns.yaml")) {
		t.Error("the chart's CRD differs from config/crd/bases: run make manifests")
	}
	var generated struct {
		Rules []map[string]any `json:"rules"`
	}
	if err := yaml.Unmarshal(read("config/rbac/role.yaml"), &generated); err != nil {
		t.Fatal(err)
	}
	objs := docs(t, helm(t, "template", "ar", "charts/agentrun", "--namespace", "x", "--kube-version", "1.34.0"))
	role := find(objs, "ClusterRole", "ar-manager")
	if role == nil {
		t.Fatal("no manager ClusterRole")
	}
	var rendered []map[string]any
	b, _ := yaml.Marshal(role["rules"])
	if err := yaml.Unmarshal(b, &rendered); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rendered, generated.Rules) {
		t.Errorf("the chart's manager rules differ from config/rbac/role.yaml:\n%v\n%v", rendered, generated.Rules)
	}
	if !strings.Contains(string(b), "pods/log") {
		t.Error("the manager needs get on pods/log to read a cut result from the event log")
	}
	for _, copied := range [][2]string{
		{"charts/agentrun/files/agentrun.dev_agentbudgets.yaml", "config/crd/bases/agentrun.dev_agentbudgets.yaml"},
		{"charts/agentrun/crds/agentrun.dev_agentrunpolicies.yaml", "config/crd/bases/agentrun.dev_agentrunpolicies.yaml"},
		{"charts/agentrun/files/admission-policy.yaml", "config/policy/admission_policy.yaml"},
	} {
		if !bytes.Equal(read(copied[0]), read(copied[1])) {
			t.Errorf("%s differs from %s: run make manifests", copied[0], copied[1])
		}
	}
}

// TestCRDIsATemplate: the chart renders the AgentRun and AgentBudget CRDs
// as templates (so `helm upgrade` upgrades them; Helm never upgrades
// crds/), exactly as generated plus the release's labels and
// resource-policy keep (uninstalling the release leaves the CRDs and so the
// runs' records and the budgets' spend);
// crds.install=false leaves them out.
func TestCRDIsATemplate(t *testing.T) {
	r := root(t)
	if _, err := os.Stat(filepath.Join(r, "charts", "agentrun", "crds", "agentrun.dev_agentruns.yaml")); err == nil {
		t.Error("charts/agentrun/crds holds the AgentRun CRD: Helm would install it once and then never upgrade it")
	}
	objs := docs(t, helm(t, "template", "ar", "charts/agentrun", "--namespace", "x", "--kube-version", "1.34.0"))
	off := docs(t, helm(t, "template", "ar", "charts/agentrun", "--kube-version", "1.34.0", "--set", "crds.install=false"))
	for _, name := range []string{"agentruns", "agentbudgets"} {
		crd := find(objs, "CustomResourceDefinition", name+".agentrun.dev")
		if crd == nil {
			t.Fatalf("no %s CRD in the rendered chart", name)
		}
		md := crd["metadata"].(map[string]any)
		annotations, _ := md["annotations"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		if annotations["helm.sh/resource-policy"] != "keep" || labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s CRD metadata %v", name, md)
		}
		delete(annotations, "helm.sh/resource-policy")
		delete(md, "labels")
		b, err := os.ReadFile(filepath.Join(r, "config", "crd", "bases", "agentrun.dev_"+name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var generated map[string]any
		if err := yaml.Unmarshal(b, &generated); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(crd, generated) {
			got, _ := yaml.Marshal(crd)
			t.Errorf("the rendered %s CRD is not the generated one:\n%.2000s", name, got)
		}
		if find(off, "CustomResourceDefinition", name+".agentrun.dev") != nil {
			t.Errorf("crds.install=false still renders the %s CRD", name)
		}
	}
}

// TestPolicyCRDIsInCRDsDir: the AgentRunPolicy CRD, and only it, is in
// crds/, as generated. Helm installs crds/ before it renders the
// templates, so `helm install --set policy.enabled=true` can create the
// AgentRunPolicy object in the same install; a CRD among the templates
// could not be (Helm maps every template to a known kind first: "ensure
// CRDs are installed first"). The price is that `helm upgrade` never
// upgrades it (docs/kubernetes/install.md says what to run).
func TestPolicyCRDIsInCRDsDir(t *testing.T) {
	r := root(t)
	entries, err := os.ReadDir(filepath.Join(r, "charts", "agentrun", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"agentrun.dev_agentrunpolicies.yaml"}) {
		t.Errorf("charts/agentrun/crds holds %v, want the AgentRunPolicy CRD only", names)
	}
	objs := docs(t, helm(t, "template", "ar", "charts/agentrun", "--kube-version", "1.34.0", "--include-crds"))
	if find(objs, "CustomResourceDefinition", "agentrunpolicies.agentrun.dev") == nil {
		t.Error("helm template --include-crds renders no AgentRunPolicy CRD")
	}
}
