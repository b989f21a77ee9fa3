package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmoduleAttacks is the review's finding 1 (1-submodule.sh): a .git
// bound read-only is a mount point, and the kernel refuses to rename a
// mount point but not the directory above it, which takes the mount along.
// The agent renames the submodule (or any directory above a repository),
// makes a repository of its own at the old path with core.fsmonitor set,
// and the user's next `git status` at the top enters it. A submodule that
// is not checked out (a clone without --recursive) had nothing protected
// at all. Each attack is made inside; the host then runs git where the
// user would, and the agent's command must not run.
func TestSubmoduleAttacks(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		git := func(dir string, args ...string) {
			t.Helper()
			c := exec.Command("git", append([]string{"-C", dir, "-c", "protocol.file.allow=always"}, args...)...)
			c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
				"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		// The submodule's upstream, and a repository with it at libs/sub.
		upstream := filepath.Join(w.outside, "upstream")
		git(w.outside, "init", "-q", "-b", "main", upstream)
		if err := os.WriteFile(filepath.Join(upstream, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(upstream, "add", "f")
		git(upstream, "commit", "-q", "-m", "s")
		origin := filepath.Join(w.outside, "origin")
		git(w.outside, "init", "-q", "-b", "main", origin)
		if err := os.WriteFile(filepath.Join(origin, "t"), []byte("t"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(origin, "add", "t")
		git(origin, "submodule", "add", "-q", upstream, "libs/sub")
		git(origin, "commit", "-q", "-m", "sm")
		// A git directory of the agent's at DIR whose fsmonitor leaves a mark.
		evil := func(dir, mark string) string {
			return fmt.Sprintf("git init -q %[1]s && git -C %[1]s config core.fsmonitor 'touch %[2]s; false'", dir, mark)
		}
		attacks := []struct {
			name     string
			populate bool   // clone --recursive
			rm       string // removed before the run (a submodule directory the user deleted)
			inside   func(mark string) string
			gitCwd   string // where the user runs git afterwards
		}{
			{"populated submodule renamed", true, "", func(mark string) string {
				return "mv libs/sub libs/sub-moved && mkdir libs/sub && " + evil("libs/sub", mark)
			}, "."},
			{"directory above a submodule renamed", true, "", func(mark string) string {
				return "mv libs libs-moved && mkdir -p libs/sub && " + evil("libs/sub", mark)
			}, "."},
			{"submodule not checked out", false, "", func(mark string) string { return evil("libs/sub", mark) }, "."},
			{"submodule directory missing", false, "libs/sub", func(mark string) string {
				return "mkdir -p libs/sub; " + evil("libs/sub", mark)
			}, "."},
			{"directory above a nested repository renamed", true, "", func(mark string) string {
				return "mv tools tools-moved && mkdir -p tools/lint && " + evil("tools/lint", mark)
			}, "tools/lint"},
		}
		for i, a := range attacks {
			ws := filepath.Join(w.ws, fmt.Sprintf("case%d", i))
			args := []string{"clone", "-q", origin, ws}
			if a.populate {
				args = append(args, "--recurse-submodules")
			}
			git(w.ws, args...)
			if err := os.MkdirAll(filepath.Join(ws, "tools", "lint"), 0o755); err != nil {
				t.Fatal(err)
			}
			git(filepath.Join(ws, "tools", "lint"), "init", "-q")
			if a.rm != "" {
				os.Remove(filepath.Join(ws, a.rm))
			}
			chownAll(t, w.ws, w.u.uid)
			mark := filepath.Join(w.outside, fmt.Sprintf("PWNED-%d", i))
			stdout, stderr, code := w.runRaw(t, []string{"--cwd", ws}, "sh", "-c", a.inside(mark)+" && echo DONE")
			if code == 125 {
				t.Fatalf("%s: the sandbox did not run: %s", a.name, stderr)
			}
			if stdout == "DONE" {
				t.Errorf("%s: the agent's attack went through inside", a.name)
			}
			// The user's next git command on the host (root trusts any
			// owner here, as a root caller in its own workspace would).
			c := exec.Command("git", "-c", "safe.directory=*", "-C", filepath.Join(ws, a.gitCwd), "status", "--short")
			c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
			out, _ := c.CombinedOutput()
			if _, err := os.Stat(mark); err == nil {
				t.Errorf("%s: git status on the host ran the agent's fsmonitor (%s)", a.name, out)
			}
		}
		// The placeholders of the submodules that were not checked out are
		// gone, and the directories made for them with them.
		if _, err := os.Lstat(filepath.Join(w.ws, "case2", "libs", "sub", ".git")); err == nil {
			t.Errorf("a placeholder .git stayed in the submodule that is not checked out")
		}
		if _, err := os.Lstat(filepath.Join(w.ws, "case3", "libs", "sub", ".git")); err == nil {
			t.Errorf("a placeholder .git stayed in the submodule directory made for the run")
		}
		// The rest of the workspace stays the agent's.
		ws := filepath.Join(w.ws, "case0")
		if stdout, stderr, _ := w.runRaw(t, []string{"--cwd", ws}, "sh", "-c", "echo x > libs/sub/new && mv t t2 && git status --short >/dev/null && echo OK"); stdout != "OK" {
			t.Errorf("the workspace must stay writable and git readable: %q %s", stdout, stderr)
		}
	})
}

// TestGitConfigLinkedIntoTheWorkspace: a .git/config (or a hook) that an
// earlier run left as a link to a file of the workspace is written through
// the link, whatever mount covers .git: the run is refused, and the user's
// next git status runs nothing of the agent's.
func TestGitConfigLinkedIntoTheWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
		c := exec.Command("git", "init", "-q", w.ws)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		cfg := filepath.Join(w.ws, "settings.conf")
		if err := os.Rename(filepath.Join(w.ws, ".git", "config"), cfg); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../settings.conf", filepath.Join(w.ws, ".git", "config")); err != nil {
			t.Fatal(err)
		}
		chownAll(t, w.ws, w.u.uid)
		mark := filepath.Join(w.outside, "PWNED")
		_, stderr, code := w.runRaw(t, nil, "sh", "-c", fmt.Sprintf("git config core.fsmonitor 'touch %s; false' && echo DONE", mark))
		if code != 125 || !strings.Contains(stderr, "symbolic link") {
			t.Errorf("a .git/config linked into the workspace: exit %d, %s", code, stderr)
		}
		c = exec.Command("git", "-c", "safe.directory=*", "-C", w.ws, "status", "--short")
		c.Env = env
		_ = c.Run()
		if _, err := os.Stat(mark); err == nil {
			t.Errorf("git status on the host ran the agent's fsmonitor")
		}
	})
}

// TestGitConfigPathsAndBareRepositories: what the repository's config
// names in the workspace (a hooks directory as husky sets it, an included
// config that does not exist yet) cannot be written inside, so the user's
// next git status and commit on the host run nothing of the agent's; a
// bare repository the agent makes of the workspace (which git finds before
// the checkout's .git above it) cannot be prevented, and is told after the
// run.
func TestGitConfigPathsAndBareRepositories(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
		git := func(dir string, args ...string) string {
			t.Helper()
			c := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...)
			c.Env = env
			out, _ := c.CombinedOutput()
			return string(out)
		}
		ws := filepath.Join(w.ws, "repo")
		git(w.ws, "init", "-q", ws)
		git(ws, "config", "core.hooksPath", ".husky")
		git(ws, "config", "include.path", "../.gitconfig-shared")
		if err := os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(ws, "add", "f")
		git(ws, "commit", "-q", "-m", "init")
		chownAll(t, w.ws, w.u.uid)
		hookMark, fsmonMark := filepath.Join(w.outside, "PWNED-hook"), filepath.Join(w.outside, "PWNED-fsmon")
		// git in the sandbox reads the missing include's placeholder (an
		// empty file) as nothing, as it reads a missing one.
		script := fmt.Sprintf(`git -c safe.directory='*' status --short >/dev/null && echo GITOK; mkdir -p .husky; printf '#!/bin/sh\ntouch %s\n' > .husky/pre-commit && chmod +x .husky/pre-commit && echo HOOK;
printf '[core]\n\tfsmonitor = "touch %s; false"\n' > .gitconfig-shared && echo CONFIG; true`, hookMark, fsmonMark)
		stdout, stderr, code := w.runRaw(t, []string{"--cwd", ws}, "sh", "-c", script)
		if code != 0 || strings.Contains(stdout, "HOOK") || strings.Contains(stdout, "CONFIG") || !strings.Contains(stdout, "GITOK") {
			t.Errorf("the agent wrote a hook or an included config: exit %d, %q %s", code, stdout, stderr)
		}
		git(ws, "status", "--short")
		git(ws, "commit", "-q", "--allow-empty", "-m", "next")
		for _, m := range []string{hookMark, fsmonMark} {
			if _, err := os.Stat(m); err == nil {
				t.Errorf("git on the host ran the agent's %s", filepath.Base(m))
			}
		}
		for _, p := range []string{".husky", ".gitconfig-shared"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
				t.Errorf("the placeholder %s stayed after the run", p)
			}
		}

		// A subdirectory of the checkout made a bare repository.
		sub := filepath.Join(ws, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		chownAll(t, w.ws, w.u.uid)
		bareMark := filepath.Join(w.outside, "PWNED-bare")
		script = fmt.Sprintf(`mkdir objects refs && echo "ref: refs/heads/main" > HEAD && printf '[core]\n\tfsmonitor = "touch %s; false"\n' > config`, bareMark)
		_, stderr, code = w.runRaw(t, []string{"--cwd", sub}, "sh", "-c", script)
		if code != 0 || !strings.Contains(stderr, "warning: the agent left a git repository at "+sub+":") {
			t.Errorf("a bare repository left in the workspace was not told: exit %d, %s", code, stderr)
		}

		// One hidden from the caller: an agent that runs as the caller
		// can take the caller's access to a directory of its own away.
		app := filepath.Join(sub, "app")
		os.RemoveAll(filepath.Join(sub, "HEAD"))
		script = `mkdir app && cd app && mkdir objects refs && echo "ref: refs/heads/main" > HEAD && cd .. && chmod 0311 app`
		_, stderr, code = w.runRaw(t, []string{"--cwd", sub}, "sh", "-c", script)
		if err := os.Chmod(app, 0o755); err != nil {
			t.Fatal(err)
		}
		if code != 0 || !strings.Contains(stderr, "left a git repository at "+app+":") && !strings.Contains(stderr, "the agent left "+app+" unreadable") {
			t.Errorf("a repository in a directory made unreadable was not told: exit %d, %s", code, stderr)
		}
	})
}

// TestPlaceholderUnderADirectoryOfAnotherOwner: where the caller cannot
// make a placeholder (an include in a directory root owns), the agent
// cannot write there either, but it could rename the directory and make
// its own at the old name: the directory is pinned for the run.
func TestPlaceholderUnderADirectoryOfAnotherOwner(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
		git := func(args ...string) {
			c := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", w.ws}, args...)...)
			c.Env = env
			_ = c.Run()
		}
		git("init", "-q")
		git("config", "include.path", "../conf/local.inc")
		chownAll(t, w.ws, w.u.uid)
		conf := filepath.Join(w.ws, "conf")
		if err := os.Mkdir(conf, 0o755); err != nil {
			t.Fatal(err)
		} // root's
		mark := filepath.Join(w.outside, "PWNED")
		script := fmt.Sprintf(`mv conf conf.old && mkdir conf && printf '[core]\n\tfsmonitor = "touch %s; false"\n' > conf/local.inc && echo MOVED`, mark)
		stdout, stderr, code := w.runRaw(t, nil, "sh", "-c", script)
		if code == 125 || strings.Contains(stdout, "MOVED") {
			t.Errorf("the directory above the include could be moved: exit %d, %q %s", code, stdout, stderr)
		}
		git("status", "--short")
		if _, err := os.Stat(mark); err == nil {
			t.Errorf("git on the host ran the agent's fsmonitor")
		}
	})
}
