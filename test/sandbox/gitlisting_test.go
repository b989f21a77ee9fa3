package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitDirectoryThatCannotBeListed: the check for links out of a git
// directory reads one listing of it; a .git the caller may search but not
// list (mode 0311, which an earlier run's agent may leave) has none, and
// each name is then looked at on its own: a link the agent planted there
// (info, to a directory of the workspace) is refused all the same. As root
// the listing is there; as uid 65534 it is not.
func TestGitDirectoryThatCannotBeListed(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		if out, err := exec.Command("git", "init", "-q", w.ws).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		gitDir := filepath.Join(w.ws, ".git")
		agentDir := filepath.Join(w.ws, "agent-info")
		if err := os.Mkdir(agentDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(gitDir, "info")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../agent-info", filepath.Join(gitDir, "info")); err != nil {
			t.Fatal(err)
		}
		chownAll(t, w.ws, w.u.uid)
		if err := os.Chmod(gitDir, 0o311); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(gitDir, 0o755) })
		_, stderr, code := w.runRaw(t, nil, "true")
		if code != 125 || !strings.Contains(stderr, filepath.Join(gitDir, "info")+" is a symbolic link") {
			t.Errorf("a link in a .git that cannot be listed: exit %d, %s", code, stderr)
		}
	})
}
