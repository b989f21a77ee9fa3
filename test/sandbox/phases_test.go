package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The start-up timeline (AGENTRUN_PHASES=FILE) is appended by the runner
// after the agent ended, as the caller (root or not). The agent may have
// planted something at FILE when it lies in the workspace, and another
// user of the machine when it lies in a directory others can write (/tmp,
// /var/tmp): a link there would make the runner append to a file of the
// caller's choosing in neither's reach, a FIFO would hold the runner on
// its open forever.

// phasesHangGuard bounds how long one start may take before the test
// takes it for hung on a FIFO: far above any start, so no timing is
// asserted, only that it ends.
const phasesHangGuard = time.Minute

// runWithPhases is `agentrun sandbox -- CMD...` as w.u in w.ws with
// AGENTRUN_PHASES=phases; a run still going after phasesHangGuard is
// released (a reader opens the FIFO at phases, if it is one) and fails the
// test.
func (w *world) runWithPhases(t *testing.T, phases string, cmd ...string) (string, int) {
	t.Helper()
	args := append(append([]string{}, w.u.prefix...), agentrun, "sandbox", "--cwd", w.ws, "--")
	args = append(args, cmd...)
	c := exec.Command(args[0], args[1:]...)
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "AGENTRUN_PHASES=" + phases}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(phasesHangGuard):
		t.Errorf("agentrun sandbox with AGENTRUN_PHASES=%s did not end: held on the open of what is there", phases)
		if f, err := os.OpenFile(phases, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer f.Close()
		}
		<-done
	}
	return out.String(), c.ProcessState.ExitCode()
}

// TestPhasesFileFollowsNothingTheAgentPlants: the agent replaces the
// timeline's file in the workspace (or a directory on its way) with a link
// to a file of the caller's, or with a FIFO; the runner appends to
// neither, does not hang, says why, and keeps the agent's exit code.
func TestPhasesFileFollowsNothingTheAgentPlants(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		victim := filepath.Join(w.outside, "victim")
		if err := os.WriteFile(victim, []byte("host content\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(victim, w.u.uid, w.u.uid); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name, rel, plant, want string
		}{
			{"a link at the file", "phases", "ln -s " + victim + " phases", "symbolic link"},
			{"a link on the way", "sub/phases", "ln -s " + w.outside + " sub", "symbolic link"},
			{"a FIFO at the file", "fifo", "mkfifo fifo", "phases"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				p := filepath.Join(w.ws, tt.rel)
				out, code := w.runWithPhases(t, p, "sh", "-c", tt.plant+" && exit 7")
				if code != 7 || !strings.Contains(out, "AGENTRUN_PHASES") || !strings.Contains(strings.ToLower(out), tt.want) {
					t.Errorf("exit %d (want the agent's 7), %s", code, out)
				}
				if b, _ := os.ReadFile(victim); string(b) != "host content\n" {
					t.Errorf("the runner appended to the file the link names: %q", b)
				}
				if b, _ := os.ReadFile(filepath.Join(w.outside, "phases")); len(b) > 0 {
					t.Errorf("the runner wrote through the directory link: %q", b)
				}
			})
		}
		// The plain case still records.
		p := filepath.Join(w.ws, "timeline")
		if out, code := w.runWithPhases(t, p, "true"); code != 0 {
			t.Fatalf("exit %d, %s", code, out)
		}
		if b, err := os.ReadFile(p); err != nil || !strings.HasPrefix(string(b), "init=") {
			t.Errorf("no timeline: %q %v", b, err)
		}
	})
}

// TestPhasesFileInADirectoryOthersCanWrite: in a directory every user may
// write (sticky, as /tmp and /var/tmp are), another user planted a link at
// the timeline's path to a file of the caller's (root's /etc/... for a
// root caller), or a FIFO, before the run: the runner follows neither.
// The kernel's fs.protected_symlinks, off on some hosts, is not relied on.
func TestPhasesFileInADirectoryOthersCanWrite(t *testing.T) {
	const cotenant = 12345
	forEachUser(t, func(t *testing.T, w *world) {
		shared, err := os.MkdirTemp("/var/tmp", "agentrun-shared-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(shared) })
		if err := os.Chmod(shared, 0o1777); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(w.outside, "victim")
		if err := os.WriteFile(victim, []byte("host content\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(victim, w.u.uid, w.u.uid); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(shared, "phases")
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
		fifo := filepath.Join(shared, "fifo")
		if err := syscall.Mkfifo(fifo, 0o666); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{link, fifo} {
			if err := os.Lchown(p, cotenant, cotenant); err != nil {
				t.Fatal(err)
			}
		}
		// Open to every writer, as its planter would leave it (Mkfifo's
		// mode passes through the umask).
		if err := os.Chmod(fifo, 0o666); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{link, fifo} {
			out, code := w.runWithPhases(t, p, "true")
			if code != 0 || !strings.Contains(out, "AGENTRUN_PHASES") {
				t.Errorf("%s: exit %d, %s", p, code, out)
			}
		}
		if b, _ := os.ReadFile(victim); string(b) != "host content\n" {
			t.Errorf("the runner appended through another user's link: %q", b)
		}
		// A file of its own there is appended to.
		own := filepath.Join(shared, "own")
		if out, code := w.runWithPhases(t, own, "true"); code != 0 {
			t.Fatalf("exit %d, %s", code, out)
		}
		if b, err := os.ReadFile(own); err != nil || !strings.HasPrefix(string(b), "init=") {
			t.Errorf("no timeline in the caller's own file: %q %v", b, err)
		}
	})
}
