package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// swapRuns bounds TestWorkspaceSwapRace: the review's loop won 2 of 30
// root runs against a check by path and a mount by path; this test's
// tighter loop wins more often than that (see the test).
const swapRuns = 150

// TestWorkspaceSwapRace is the review's finding 6: the agent of a
// concurrent run, whose workspace holds this run's --cwd, swaps the
// directory with a link to another directory in a loop (renameat2
// RENAME_EXCHANGE). However the race falls, the sandbox may only ever hand
// out the directory that was checked: a run either works in it or fails,
// and nothing is written in the other directory.
func TestWorkspaceSwapRace(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		ws := filepath.Join(w.ws, "ws")
		svc, link := filepath.Join(ws, "svc"), filepath.Join(ws, "svc-link")
		target := filepath.Join(w.outside, "target") // writable by the caller
		for _, d := range []string{svc, target} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		chownAll(t, w.ws, w.u.uid)
		chownAll(t, w.outside, w.u.uid)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		swaps := 0
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if unix.Renameat2(unix.AT_FDCWD, svc, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
					swaps++
				}
				time.Sleep(100 * time.Microsecond)
			}
		}()
		outcomes := map[string]int{}
		for i := 0; i < swapRuns; i++ {
			args := append(append([]string{}, w.u.prefix...), agentrun, "sandbox", "--cwd", svc, "--",
				"sh", "-c", fmt.Sprintf("touch ./written-%d && echo WROTE", i))
			c := exec.Command(args[0], args[1:]...)
			c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home}
			out, _ := c.CombinedOutput()
			switch s := string(out); {
			case strings.Contains(s, "WROTE"):
				outcomes["wrote"]++
			case strings.Contains(s, "symbolic link"):
				outcomes["refused: a link"]++
			default:
				outcomes["failed"]++
				if outcomes["failed"] <= 3 {
					t.Logf("run %d: %s", i, strings.TrimSpace(s))
				}
			}
		}
		close(stop)
		wg.Wait()
		if _, err := os.Lstat(filepath.Join(svc, ".")); err != nil || isLink(svc) {
			_ = unix.Renameat2(unix.AT_FDCWD, svc, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
		}
		t.Logf("%d swaps; outcomes %v", swaps, outcomes)
		entries, _ := os.ReadDir(target)
		for _, e := range entries {
			t.Errorf("a run wrote %s in the directory the link leads to, not in its workspace", e.Name())
		}
	})
}

func isLink(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode()&os.ModeSymlink != 0
}
