package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentrun-dev/agentrun/sandbox/initproc"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after them. Started under the init's name (a link to the
// test binary, initHelper), the binary is the init instead.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == initName {
		os.Exit(initproc.Main(os.Args[1:], os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

const initName = "agentrun-sandbox-init"

// initHelper is the init as the runner starts it, for tests: this test
// binary under the init's name.
func initHelper(t *testing.T) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), initName)
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	return []string{link}
}
