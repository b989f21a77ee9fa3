package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestAPIReferenceIsCurrent regenerates the API reference from the Go
// types into a scratch file and compares it with docs/api-reference.md: a type or
// comment changed in api/ without `make docs` fails here. The pinned
// crd-ref-docs is built once into .cache/tools.
func TestAPIReferenceIsCurrent(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "api-reference.md")
	cmd := exec.Command(filepath.Join(root, "hack", "api-docs.sh"), out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/api-docs.sh: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "api-reference.md"))
	if err != nil {
		t.Fatalf("docs/api-reference.md is missing: run make docs (%v)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/api-reference.md is stale: run make docs and commit the result")
	}
}
