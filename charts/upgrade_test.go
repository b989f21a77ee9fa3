package charts

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/internal/testenv"
)

// The chart against a real kube-apiserver (envtest; no controllers run, so
// nothing needs --wait): `helm upgrade` upgrades the CRD, uninstalling
// keeps it, and a CRD that an older chart installed from crds/ is adopted
// with the commands docs/kubernetes/install.md gives.

// cluster is an envtest API server with a kubeconfig for helm and kubectl,
// and the same user's rest.Config for Go clients.
type cluster struct {
	t          *testing.T
	kubeconfig string
	kubectl    string
	cfg        *rest.Config
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	// No CRDs: the chart installs them, which is what is under test.
	env := testenv.StartT(t, testenv.Options{NoCRDs: true})
	user, err := env.AddUser(testenv.Admin("helm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, kubeconfig: path, kubectl: filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), cfg: user.Config()}
}

func (c *cluster) run(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, append(args, "--kubeconfig", c.kubeconfig)...)
	cmd.Dir = root(c.t)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *cluster) must(bin string, args ...string) string {
	c.t.Helper()
	out, err := c.run(bin, args...)
	if err != nil {
		c.t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return out
}

func (c *cluster) helm(args ...string) string {
	c.t.Helper()
	return c.must(helmBin(c.t), args...)
}

// specFields are the spec properties of the AgentRun CRD in the cluster.
func (c *cluster) specFields() string {
	c.t.Helper()
	return c.must(c.kubectl, "get", "crd", "agentruns.agentrun.dev", "-o",
		"jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties}")
}

// olderChart is a copy of the chart whose CRD lacks spec.stop, as the
// chart had before; inCRDsDir puts that CRD in crds/, where charts before
// this one kept it.
func olderChart(t *testing.T, inCRDsDir bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agentrun")
	if out, err := exec.Command("cp", "-r", filepath.Join(root(t), "charts", "agentrun"), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	crdFile := filepath.Join(dir, "files", "agentrun.dev_agentruns.yaml")
	b, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
	delete(spec["properties"].(map[string]any), "stop")
	delete(spec, "x-kubernetes-validations")
	b, err = yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if inCRDsDir {
		if err := os.Remove(filepath.Join(dir, "templates", "crd.yaml")); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "crds"), 0o755); err != nil {
			t.Fatal(err)
		}
		crdFile = filepath.Join(dir, "crds", "agentrun.dev_agentruns.yaml")
	}
	if err := os.WriteFile(crdFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func helmBin(t *testing.T) string {
	t.Helper()
	tool := exec.Command(filepath.Join(root(t), "hack", "k8s-tool.sh"), "helm")
	var stderr bytes.Buffer
	tool.Stderr = &stderr
	bin, err := tool.Output()
	if err != nil {
		t.Fatalf("building helm: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(bin))
}

// TestHelmUpgradeUpgradesCRD: an installed release whose CRD lacks a field
// gets it from `helm upgrade`; `helm uninstall` leaves the CRD.
func TestHelmUpgradeUpgradesCRD(t *testing.T) {
	isolateHelm(t)
	c := startCluster(t)
	c.helm("install", "agentrun", olderChart(t, false), "--namespace", "agentrun-system", "--create-namespace")
	if strings.Contains(c.specFields(), `"stop"`) {
		t.Fatal("the older chart's CRD has spec.stop")
	}
	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system")
	if !strings.Contains(c.specFields(), `"stop"`) {
		t.Fatal("helm upgrade did not upgrade the CRD: spec.stop is missing")
	}
	// --no-hooks: the pre-delete hook is a Job, and envtest runs no Job
	// controller to complete it (test/e2e's TestUninstallMidRun runs it).
	c.helm("uninstall", "agentrun", "--namespace", "agentrun-system", "--no-hooks")
	if _, err := c.run(c.kubectl, "get", "crd", "agentruns.agentrun.dev"); err != nil {
		t.Errorf("helm uninstall removed the CRD (and with it every AgentRun): %v", err)
	}
}

// TestAdoptCRDFromCRDsDir: a release installed from a chart that kept the
// CRD in crds/ (so Helm does not own it) upgrades to this chart after the
// two adoption commands of docs/kubernetes/install.md, and its CRD is upgraded.
func TestAdoptCRDFromCRDsDir(t *testing.T) {
	isolateHelm(t)
	c := startCluster(t)
	c.helm("install", "agentrun", olderChart(t, true), "--namespace", "agentrun-system", "--create-namespace")
	if strings.Contains(c.specFields(), `"stop"`) {
		t.Fatal("the older chart's CRD has spec.stop")
	}
	out, err := c.run(helmBin(t), "upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system")
	if err == nil || !strings.Contains(out, "invalid ownership metadata") {
		t.Fatalf("helm upgrade over a CRD Helm does not own: %v\n%s", err, out)
	}
	// docs/kubernetes/install.md, "Upgrading from a chart that kept the CRD in crds/".
	c.must(c.kubectl, "label", "--overwrite", "crd", "agentruns.agentrun.dev", "app.kubernetes.io/managed-by=Helm")
	c.must(c.kubectl, "annotate", "--overwrite", "crd", "agentruns.agentrun.dev",
		"meta.helm.sh/release-name=agentrun", "meta.helm.sh/release-namespace=agentrun-system")
	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system")
	if !strings.Contains(c.specFields(), `"stop"`) {
		t.Fatal("after the adoption, helm upgrade did not upgrade the CRD")
	}
}

// TestPolicyCRDUpgrade: Helm never upgrades crds/, so a release whose
// AgentRunPolicy CRD lacks a field keeps lacking it after `helm upgrade`;
// docs/kubernetes/install.md's command before the upgrade brings it.
func TestPolicyCRDUpgrade(t *testing.T) {
	isolateHelm(t)
	c := startCluster(t)
	older := filepath.Join(t.TempDir(), "agentrun")
	if out, err := exec.Command("cp", "-r", filepath.Join(root(t), "charts", "agentrun"), older).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	crdFile := filepath.Join(older, "crds", "agentrun.dev_agentrunpolicies.yaml")
	b, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	props := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	delete(props, "maxTokens")
	if b, err = yaml.Marshal(crd); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crdFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fields := func() string {
		return c.must(c.kubectl, "get", "crd", "agentrunpolicies.agentrun.dev", "-o",
			"jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties}")
	}
	c.helm("install", "agentrun", older, "--namespace", "agentrun-system", "--create-namespace")
	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system")
	if strings.Contains(fields(), `"maxTokens"`) {
		t.Fatal("helm upgrade upgraded crds/ after all: docs/kubernetes/install.md and the chart's notes say it does not")
	}
	// docs/kubernetes/install.md, "the AgentRunPolicy CRD ... apply it first".
	c.must(c.kubectl, "apply", "--server-side", "--force-conflicts", "-f", "charts/agentrun/crds/")
	if !strings.Contains(fields(), `"maxTokens"`) {
		t.Error("kubectl apply --server-side did not upgrade the AgentRunPolicy CRD")
	}
	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--set", "policy.enabled=true",
		"--set", "policy.spec.maxTokens=1000")
	if out := c.must(c.kubectl, "get", "agentrunpolicy", "agentrun-policy", "-o", "jsonpath={.spec.maxTokens}"); out != "1000" {
		t.Errorf("maxTokens %q after the upgrade", out)
	}
}

// TestUpgradeFromBeforeThePolicy: a release installed by a chart that had
// no admin policy (no AgentRunPolicy CRD in crds/, no policy templates)
// upgrades to this chart, whose policy is on by default, with the commands
// docs/security.md gives: `helm upgrade` alone stops (Helm never installs
// crds/ on an upgrade, and the policy's AgentRunPolicy needs its CRD)
// and changes nothing; after applying crds/ it goes through and the policy
// is in force.
func TestUpgradeFromBeforeThePolicy(t *testing.T) {
	isolateHelm(t)
	c := startCluster(t)
	older := filepath.Join(t.TempDir(), "agentrun")
	if out, err := exec.Command("cp", "-r", filepath.Join(root(t), "charts", "agentrun"), older).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, p := range []string{"crds", "templates/policy.yaml"} {
		if err := os.RemoveAll(filepath.Join(older, p)); err != nil {
			t.Fatal(err)
		}
	}
	c.helm("install", "agentrun", older, "--namespace", "agentrun-system", "--create-namespace")
	if _, err := c.run(c.kubectl, "get", "crd", "agentrunpolicies.agentrun.dev"); err == nil {
		t.Fatal("the older chart installed the AgentRunPolicy CRD")
	}
	out, err := c.run(helmBin(t), "upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system")
	if err == nil || !strings.Contains(out, "AgentRunPolicy") {
		t.Fatalf("helm upgrade without the policy's CRD: %v\n%s\nwant it to stop at the AgentRunPolicy", err, out)
	}
	// docs/security.md, "Upgrading".
	c.must(c.kubectl, "apply", "--server-side", "--force-conflicts", "-f", "charts/agentrun/crds/")
	c.must(c.kubectl, "wait", "--for=condition=Established", "crd/agentrunpolicies.agentrun.dev", "--timeout=60s")
	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system")
	if got := c.must(c.kubectl, "get", "agentrunpolicy", "agentrun-policy", "-o", "jsonpath={.metadata.labels.agentrun\\.dev/policy-preset}"); got != "standard" {
		t.Errorf("the AgentRunPolicy's preset %q after the upgrade", got)
	}
	k, _ := policyClient(t, c.cfg)
	run := agentRun("default", func(s *v1alpha1.AgentRunSpec) { s.Sandbox = v1alpha1.SandboxNone })
	waitFor(t, "the upgraded release's policy refuses sandbox none", 90*time.Second, func() string {
		return refusedWith(tryCreate(context.Background(), k, run), "spec.sandbox None is not allowed")
	})
}
