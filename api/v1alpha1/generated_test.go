package v1alpha1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates everything controller-gen
// derives from the markers into a scratch directory and compares it with
// the committed files: a marker changed without `make generate manifests`
// fails here. The pinned controller-gen is built once into .cache/tools.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "k8s-generate.sh"), "all", out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/k8s-generate.sh: %v\n%s", err, b)
	}
	for _, f := range []string{
		"api/v1alpha1/zz_generated.deepcopy.go",
		"config/crd/bases/agentrun.dev_agentruns.yaml",
		"config/crd/bases/agentrun.dev_agentrunpolicies.yaml",
		"config/crd/bases/agentrun.dev_agentbudgets.yaml",
		"config/rbac/role.yaml",
		"charts/agentrun/files/agentrun.dev_agentruns.yaml",
		"charts/agentrun/files/agentrun.dev_agentbudgets.yaml",
		"charts/agentrun/files/manager-role.yaml",
		"charts/agentrun/crds/agentrun.dev_agentrunpolicies.yaml",
		"charts/agentrun/files/admission-policy.yaml",
		"config/guard/profile_guard.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatalf("%s was not generated: %v", f, err)
		}
		got, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Errorf("%s is missing: run make generate manifests", f)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make generate manifests and commit the result", f)
		}
	}
}
