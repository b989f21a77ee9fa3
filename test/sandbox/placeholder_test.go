package sandbox

// The deny list's placeholders (issue 21): a home whose owner linked a
// directory of it elsewhere must not get the caller to make placeholders
// there; a root caller leaves nothing of its own in another user's home;
// and what a run made is gone when it ends.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree lists every path below dir with its owner, type and size, for
// before-and-after comparisons.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		lines = append(lines, fmt.Sprintf("%s uid=%d %s size=%d", strings.TrimPrefix(p, dir), st.Uid, fi.Mode().Type(), fi.Size()))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestPlaceholdersFollowNoLinks: the caller's home links ~/.config and
// ~/.cargo to directories elsewhere (for the root caller, directories root
// owns, as a home's owner would link them to make root write there). The
// run makes no placeholder through the links (no gh, glab-cli, credentials
// appear in the linked directories), the placeholders it does make are
// gone afterwards, and the home is as it was.
func TestPlaceholdersFollowNoLinks(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		config, cargo := filepath.Join(w.outside, "sysconfig"), filepath.Join(w.outside, "syscargo")
		for _, d := range []string{config, cargo} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(d, 0, 0); err != nil {
				t.Fatal(err)
			} // root's, whoever the caller is
		}
		// The world's home has a real ~/.config (gcloud's credentials):
		// move it aside so that the link replaces it.
		if err := os.Rename(filepath.Join(w.home, ".config"), filepath.Join(w.home, "config.real")); err != nil {
			t.Fatal(err)
		}
		for link, target := range map[string]string{".config": config, ".cargo": cargo} {
			if err := os.Symlink(target, filepath.Join(w.home, link)); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(filepath.Join(w.home, link), w.u.uid, w.u.uid); err != nil {
				t.Fatal(err)
			}
		}
		before := tree(t, w.home)
		seen := make(chan string, 1)
		go func() {
			// While the sandbox runs: what the run made in the home.
			time.Sleep(700 * time.Millisecond)
			seen <- tree(t, w.home)
		}()
		out, stderr, code := w.runRaw(t, nil, "sh", "-c", "sleep 1.5; echo ran")
		if code != 0 || out != "ran" {
			t.Fatalf("the sandbox did not run: exit %d, %q %s", code, out, stderr)
		}
		during := <-seen
		for _, d := range []string{config, cargo} {
			if entries, _ := os.ReadDir(d); len(entries) > 0 {
				t.Errorf("a placeholder was made through the home's link in %s: %v", d, entries)
			}
		}
		if !strings.Contains(during, "/.netrc uid="+fmt.Sprint(w.u.uid)) {
			t.Errorf("no ~/.netrc placeholder during the run (the deny list should still cover a missing file):\n%s", during)
		}
		if after := tree(t, w.home); after != before {
			t.Errorf("the home changed: the run's placeholders were left\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// TestPlaceholdersInAnotherUsersHome: root (or a user the project is
// shared with) works in alice's project, and alice's credentials are on
// the deny list. Alice linked ~/.config to a directory root owns. A root
// caller makes alice's missing placeholders as alice's (never root's,
// which she could not use), none through her link, and removes them at the
// end; an unprivileged caller makes none in her home at all. Alice is a
// user of a private /etc/passwd, as in TestWorkspaceOwnersCredentialsAreDenied.
func TestPlaceholdersInAnotherUsersHome(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		const aliceUID = 4243
		alice := filepath.Join(w.outside, "alice")
		proj := filepath.Join(alice, "proj")
		for rel, content := range map[string]string{".aws/credentials": secret, "proj/main.go": "package main"} {
			p := filepath.Join(alice, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rootDir := filepath.Join(w.outside, "etc-like")
		if err := os.Mkdir(rootDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rootDir, filepath.Join(alice, ".config")); err != nil {
			t.Fatal(err)
		}
		chownAll(t, alice, aliceUID)
		if err := os.Chown(rootDir, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(alice, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(proj, 0o777); err != nil {
			t.Fatal(err)
		} // shared with the caller
		hostPasswd, _ := os.ReadFile("/etc/passwd")
		passwd := filepath.Join(w.outside, "passwd")
		if err := os.WriteFile(passwd, append(hostPasswd, fmt.Sprintf("alice:x:%d:%d::%s:/bin/sh\n", aliceUID, aliceUID, alice)...), 0o644); err != nil {
			t.Fatal(err)
		}
		before := tree(t, alice)
		seen := make(chan string, 1)
		go func() {
			time.Sleep(700 * time.Millisecond)
			seen <- tree(t, alice)
		}()
		args := append([]string{"unshare", "-m", "--", "sh", "-c", `mount --bind "$0" /etc/passwd && exec "$@"`, passwd},
			append(append(append([]string{}, w.u.prefix...), agentrun, "sandbox", "--cwd", proj, "--"),
				"sh", "-c", "sleep 1.5; "+probe+" read "+filepath.Join(alice, ".aws/credentials"))...)
		c := exec.Command(args[0], args[1:]...)
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home}
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		_ = c.Run()
		during := <-seen
		if code := c.ProcessState.ExitCode(); code != 0 || !strings.HasPrefix(strings.TrimSpace(stdout.String()), "denied:") {
			t.Fatalf("the run in alice's project: exit %d, %q %s", code, stdout.String(), stderr.String())
		}
		if entries, _ := os.ReadDir(rootDir); len(entries) > 0 {
			t.Errorf("a placeholder was made through alice's link in a directory root owns: %v", entries)
		}
		// What the run made in her home while it ran.
		var made []string
		for _, line := range strings.Split(during, "\n") {
			if line != "" && !strings.Contains(before, line) {
				made = append(made, line)
			}
		}
		for _, line := range made {
			if !strings.Contains(line, fmt.Sprintf("uid=%d ", aliceUID)) {
				t.Errorf("a placeholder in alice's home is not hers: %s", line)
			}
		}
		switch {
		case w.u.uid == 0 && !strings.Contains(strings.Join(made, "\n"), "/.ssh uid="):
			t.Errorf("root made no ~/.ssh placeholder for alice (her deny list should hold):\n%s", strings.Join(made, "\n"))
		case w.u.uid != 0 && len(made) > 0:
			t.Errorf("an unprivileged caller made placeholders in alice's home:\n%s", strings.Join(made, "\n"))
		}
		if after := tree(t, alice); after != before {
			t.Errorf("alice's home changed: placeholders were left\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// TestRootsPlaceholderStaysWhileAnotherUsersRunHoldsIt: root's run makes a
// placeholder for a missing deny path in a directory of root's that every
// user may search (as /run/secrets in /run); another user's run, started
// meanwhile, mounts over it. When root's run ends first, the placeholder
// must stay: removing a mount point detaches its mount in every namespace,
// so the other run would lose its protection mid-run, and what root then
// puts there (a secret mounted later) would be the other agent's to read.
// That run could not lock root's private placeholder before; now root's
// placeholders there are readable by all, and it holds them.
func TestRootsPlaceholderStaysWhileAnotherUsersRunHoldsIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root and another user (CI runs as root)")
	}
	shared, err := os.MkdirTemp("/var/tmp", "agentrun-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	denied := filepath.Join(shared, "secrets")
	root, other := newWorld(t, users[0]), newWorld(t, users[1])
	start := func(w *world, script string) (*exec.Cmd, *bytes.Buffer) {
		args := append(append([]string{}, w.u.prefix...), agentrun, "sandbox", "--cwd", w.ws, "--deny-read", denied, "--", "sh", "-c", script)
		c := exec.Command(args[0], args[1:]...)
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home}
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, &out
	}
	waitFor := func(p, what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Lstat(p); err == nil {
				return
			}
		}
		t.Fatalf("%s: %s never appeared", what, p)
	}
	rootRun, rootOut := start(root, "until [ -e go ]; do sleep 0.05; done")
	waitFor(denied, "root's placeholder")
	otherRun, otherOut := start(other, "touch started; until [ -e go ]; do sleep 0.05; done; cat "+denied+"/token 2>/dev/null || echo hidden")
	waitFor(filepath.Join(other.ws, "started"), "the other user's agent")
	if err := os.WriteFile(filepath.Join(root.ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rootRun.Wait(); err != nil {
		t.Fatalf("root's run: %v %s", err, rootOut)
	}
	// Root's run is over; root now puts a secret at the denied path.
	if err := os.MkdirAll(denied, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(denied, "token"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other.ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := otherRun.Wait(); err != nil {
		t.Fatalf("the other user's run: %v %s", err, otherOut)
	}
	if got := strings.TrimSpace(otherOut.String()); got != "hidden" {
		t.Errorf("the other user's agent read %q at the deny path after root's run ended (want hidden)", got)
	}
}
