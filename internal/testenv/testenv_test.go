package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDeclares(t *testing.T) {
	for _, tt := range []struct {
		gomod string
		want  bool
	}{
		{"module github.com/agentrun-dev/agentrun\n\ngo 1.26\n", true},
		{"// a comment\nmodule \"github.com/agentrun-dev/agentrun\"\n", true},
		{"module github.com/agentrun-dev/agentrun/hack/images\n", false},
		{"module github.com/agentrun-dev/agentrunner\n", false},
		{"require github.com/agentrun-dev/agentrun v0.0.0\n", false},
		{"", false},
	} {
		if got := declares([]byte(tt.gomod), module); got != tt.want {
			t.Errorf("declares(%q) = %t, want %t", tt.gomod, got, tt.want)
		}
	}
}

// TestModuleRoot: from a package's directory (where go test runs) the root
// is the directory holding the CRDs, and a separate module's go.mod on
// the way up is passed over.
func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Errorf("ModuleRoot() = %s, which has no config/crd/bases: %v", root, err)
	}
	t.Chdir(filepath.Join(root, "hack", "images"))
	if again, err := ModuleRoot(); err != nil || again != root {
		t.Errorf("from hack/images (another module): %q, %v, want %q", again, err, root)
	}
	t.Chdir(t.TempDir())
	if _, err := ModuleRoot(); err == nil {
		t.Error("outside the module: no error")
	}
}

// TestStartWithoutAssets: without KUBEBUILDER_ASSETS Start says how to get
// the binaries instead of looking in envtest's default places.
func TestStartWithoutAssets(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	if _, err := Start(Options{}); !errors.Is(err, ErrNoAssets) {
		t.Errorf("Start = %v, want ErrNoAssets", err)
	}
}
