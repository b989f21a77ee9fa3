package sandbox

// The second round of attacks (issue 10 of the security review): a root
// caller's agent must not be the host's root, kernel knobs stay read-only,
// the caller's keyring, foreign socket families and nested user namespaces
// are out of reach, a fork bomb stops at the agent's limit, the workspace
// cannot be the machine or a home, deny entries cannot sit where the agent
// could move them, the repository's .git is read-only, and no file the
// runner writes follows a link an agent planted.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runRaw is `agentrun sandbox FLAGS -- CMD...` as w.u, in w.ws unless the
// flags say otherwise; unlike run it accepts a sandbox that refused to
// start (exit 125) and returns stdout, stderr and the exit code.
func (w *world) runRaw(t *testing.T, flags []string, cmd ...string) (string, string, int) {
	t.Helper()
	args := append(append([]string{}, w.u.prefix...), agentrun, "sandbox", "--cwd", w.ws)
	args = append(append(append(args, flags...), "--"), cmd...)
	c := exec.Command(args[0], args[1:]...)
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(stdout.String()), stderr.String(), code
}

func TestAgentIsNotTheHostRoot(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		// A root-owned private file outside every deny list.
		private := filepath.Join(w.outside, "root-only")
		if err := os.WriteFile(private, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(private, 0, 0); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/etc/shadow", private} {
			if o := w.run(t, nil, nil, probe, "read", p); !strings.HasPrefix(o.stdout, "denied:") {
				t.Errorf("read %s: %q", p, o.stdout)
			}
		}
		// The agent's uid as the host sees it: a process of the sandbox,
		// found on the host by its unique arguments.
		outside := agentHostUID(t, w)
		if outside == 0 {
			t.Errorf("the agent runs as the host's root")
		}
		if w.u.uid != 0 && outside != w.u.uid {
			t.Errorf("an unprivileged caller's agent keeps the caller's uid %d, got %d", w.u.uid, outside)
		}
		// What the agent writes in the workspace belongs to the
		// workspace's owner on the host, as before.
		if o := w.run(t, nil, nil, probe, "write", filepath.Join(w.ws, "made-inside")); o.stdout != "ok" {
			t.Fatalf("write in the workspace: %q", o.stdout)
		}
		st, err := os.Stat(filepath.Join(w.ws, "made-inside"))
		if err != nil || int(st.Sys().(*syscall.Stat_t).Uid) != w.u.uid {
			t.Errorf("a file the agent made is not the workspace owner's: %v %v", st, err)
		}
	})
}

// agentHostUID starts a sleeping agent and reads its real uid from the
// host's /proc.
func agentHostUID(t *testing.T, w *world) int {
	t.Helper()
	marker := fmt.Sprintf("%d.%d", 3, time.Now().UnixNano()%1000000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(t, nil, nil, "sleep", marker)
	}()
	defer func() { <-done }()
	for i := 0; i < 200; i++ {
		pids, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range pids {
			cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
			if string(cmd) != "sleep\x00"+marker+"\x00" {
				continue
			}
			status, _ := os.ReadFile(filepath.Join(p, "status"))
			for _, l := range strings.Split(string(status), "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
					uid, _ := strconv.Atoi(f[1])
					return uid
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the agent's process was not found on the host")
	return -1
}

func TestKernelKnobsReadOnly(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		for _, proc := range []string{"fresh", "host"} {
			env := []string{"AGENTRUN_SANDBOX_PROC=" + proc}
			for _, p := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/overcommit_memory",
				"/proc/sysrq-trigger", "/proc/sys/fs/protected_symlinks"} {
				if o := w.run(t, nil, env, probe, "writable", p); !strings.HasPrefix(o.stdout, "denied:") {
					t.Errorf("/proc %s: %s is writable inside: %q", proc, p, o.stdout)
				}
			}
			// The attack itself, writing the current value back: harmless
			// if it went through, which the check below would catch.
			before, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
			o := w.run(t, nil, env, "sh", "-c", "cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern && echo WROTE")
			if strings.Contains(o.stdout, "WROTE") {
				t.Errorf("/proc %s: kernel.core_pattern was written from inside", proc)
			}
			if after, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); !bytes.Equal(before, after) {
				t.Fatalf("kernel.core_pattern changed: %q -> %q", before, after)
			}
		}
	})
}

func TestSessionKeyringUnreachable(t *testing.T) {
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			// The caller's session keyring, with a key in it, is inherited
			// by everything it starts: the test joins a keyring of its own
			// on this thread and starts agentrun from it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if _, err := unix.KeyctlJoinSessionKeyring("agentrun-test"); err != nil {
				t.Fatalf("join a session keyring: %v", err)
			}
			id, err := unix.AddKey("user", "agentrun-test-token", []byte(secret), unix.KEY_SPEC_SESSION_KEYRING)
			if err != nil {
				t.Fatalf("add_key: %v", err)
			}
			// Readable by anyone who possesses it, as a login token is.
			if err := unix.KeyctlSetperm(id, 0x3f3f3f3f); err != nil {
				t.Fatalf("setperm: %v", err)
			}
			o := w.run(t, nil, nil, probe, "keyring", hex.EncodeToString([]byte(secret)))
			if !strings.HasPrefix(o.stdout, "denied:") || strings.Contains(o.stdout, "found") {
				t.Errorf("the caller's session keyring is readable inside: %q", o.stdout)
			}
		})
	}
}

func TestOnlyInternetAndRouteNetlinkSockets(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		tests := []struct {
			name    string
			args    []string
			allowed bool
		}{
			{"inet", []string{strconv.Itoa(unix.AF_INET)}, true},
			{"inet6", []string{strconv.Itoa(unix.AF_INET6)}, true},
			{"netlink route", []string{strconv.Itoa(unix.AF_NETLINK), strconv.Itoa(unix.NETLINK_ROUTE)}, true},
			{"netlink uevent", []string{strconv.Itoa(unix.AF_NETLINK), strconv.Itoa(unix.NETLINK_KOBJECT_UEVENT)}, false},
			{"netlink audit", []string{strconv.Itoa(unix.AF_NETLINK), strconv.Itoa(unix.NETLINK_AUDIT)}, false},
			{"vsock", []string{strconv.Itoa(unix.AF_VSOCK)}, false},
			{"alg", []string{strconv.Itoa(unix.AF_ALG)}, false},
			{"packet", []string{strconv.Itoa(unix.AF_PACKET)}, false},
			{"unix", []string{strconv.Itoa(unix.AF_UNIX)}, false},
		}
		for _, tt := range tests {
			o := w.run(t, nil, nil, append([]string{probe, "socket"}, tt.args...)...)
			if got := o.stdout == "ok"; got != tt.allowed {
				t.Errorf("socket %s: %q, allowed %v", tt.name, o.stdout, tt.allowed)
			}
		}
	})
}

func TestNoNestedUserNamespaces(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		for _, cmd := range [][]string{{"unshare", "-r", "true"}, {"unshare", "-rn", "true"}, {"unshare", "--user", "true"}} {
			o := w.run(t, nil, nil, append([]string{"sh", "-c", `"$@" && echo NESTED`, "sh"}, cmd...)...)
			if strings.Contains(o.stdout, "NESTED") || o.exit == 0 {
				t.Errorf("%v inside the sandbox made a user namespace: exit %d %q", cmd, o.exit, o.stdout)
			}
		}
	})
}

func TestProcessLimitStopsAForkBomb(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		const limit = 48
		o := w.run(t, []string{"--max-procs", strconv.Itoa(limit)}, nil, probe, "forks", "500")
		var started int
		if _, err := fmt.Sscanf(o.stdout, "denied: %d started", &started); err != nil || started >= limit {
			t.Errorf("the process limit %d did not hold: %q", limit, o.stdout)
		}
		o = w.run(t, nil, nil, "sh", "-c", "grep -E '^Max (core file size|processes) ' /proc/self/limits")
		for _, want := range []string{"Max core file size        0                    0", "Max processes             4096                 4096"} {
			if !strings.Contains(o.stdout, want) {
				t.Errorf("core dumps off and the default process limit: %q lacks %q", o.stdout, want)
			}
		}
	})
}

func TestWorkspaceCannotBeTheMachineOrAHome(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		for _, cwd := range []string{"/", w.home, filepath.Dir(w.home),
			// system trees and shared scratch directories (finding 5)
			"/usr/local/sbin", "/etc", "/var/lib", "/opt", "/run", "/tmp", "/var/tmp", "/dev/shm"} {
			_, stderr, code := w.runRaw(t, []string{"--cwd", cwd}, "true")
			if code != 125 || !strings.Contains(stderr, "pass --cwd with a project directory") {
				t.Errorf("--cwd %s: exit %d, %s", cwd, code, stderr)
			}
		}
	})
}

func TestDenyEntryInsideTheWorkspaceIsRefused(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		inside := filepath.Join(w.ws, "secrets", "key")
		_, stderr, code := w.runRaw(t, []string{"--deny-read", inside}, "true")
		if code != 125 || !strings.Contains(stderr, "inside the working directory") {
			t.Errorf("--deny-read inside the workspace: exit %d, %s", code, stderr)
		}
	})
}

func TestRepositoryGitDirIsReadOnly(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		git := exec.Command("git", "init", "-q", w.ws)
		if out, err := git.CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		chownAll(t, w.ws, w.u.uid)
		attacks := map[string]string{
			"hook":      "echo evil > .git/hooks/post-checkout",
			"config":    "git config core.fsmonitor 'echo PWNED'",
			"commondir": "echo ../evil > .git/commondir",
			"replace":   "mv .git .git-old && mkdir .git",
		}
		for name, cmd := range attacks {
			o := w.run(t, nil, nil, "sh", "-c", cmd+" && echo DONE")
			if strings.Contains(o.stdout, "DONE") {
				t.Errorf("%s: the agent changed the repository's .git: %q", name, o.stdout)
			}
		}
		if _, err := os.Stat(filepath.Join(w.ws, ".git", "commondir")); err == nil {
			t.Errorf(".git/commondir appeared on the host")
		}
		if o := w.run(t, nil, nil, "sh", "-c", "git status --short >/dev/null && echo ok > tracked.txt && cat tracked.txt"); o.stdout != "ok" {
			t.Errorf("the rest of the workspace stays writable and git readable: %q", o.stdout)
		}
		if o := w.run(t, []string{"--writable-git"}, nil, "sh", "-c", "echo x > .git/description && echo DONE"); o.stdout != "DONE" {
			t.Errorf("--writable-git: %q", o.stdout)
		}
	})
}

func TestEventsFileDoesNotFollowAPlantedLink(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		victim := filepath.Join(w.outside, "victim")
		if err := os.WriteFile(victim, []byte("host content"), 0o644); err != nil {
			t.Fatal(err)
		}
		planted := filepath.Join(w.ws, "events.jsonl")
		if err := os.Symlink(victim, planted); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := w.runRaw(t, []string{"--events", planted}, "true")
		if code != 125 || !strings.Contains(stderr, "symbolic link") {
			t.Errorf("--events through a planted link: exit %d, %s", code, stderr)
		}
		if b, _ := os.ReadFile(victim); string(b) != "host content" {
			t.Errorf("the host file was overwritten: %q", b)
		}
	})
}

func TestRootCallerWorkspaceUnderAClosedDirectory(t *testing.T) {
	w := newWorld(t, users[0])
	closed, err := os.MkdirTemp("/var/tmp", "agentrun-closed-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(closed)
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	} // as /root is
	ws := filepath.Join(closed, "project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(closed, "sibling-secret"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := w.runRaw(t, []string{"--cwd", ws}, "sh", "-c",
		fmt.Sprintf("pwd; echo hi > made; cat made; ls %s", closed))
	if code != 0 || !strings.HasPrefix(stdout, ws+"\nhi\nproject") || strings.Contains(stdout, "sibling-secret") {
		t.Errorf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
}

// TestRunnerFilesBehindAliasesOfTheWorkspace: the runner's own files named
// relative to the current directory (the workspace), through /proc/self/root
// or through a link to the workspace must not follow a link an earlier
// agent planted there: --events would truncate the host file, --env-file
// would hand its content to the agent.
func TestRunnerFilesBehindAliasesOfTheWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		victim := filepath.Join(w.outside, "victim")
		if err := os.WriteFile(victim, []byte("HOST_SECRET="+secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(victim, w.u.uid, w.u.uid); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"events.jsonl", "vars.env"} {
			if err := os.Symlink(victim, filepath.Join(w.ws, name)); err != nil {
				t.Fatal(err)
			}
		}
		wslink := filepath.Join(w.outside, "wslink")
		if err := os.Symlink(w.ws, wslink); err != nil {
			t.Fatal(err)
		}
		forms := map[string]string{
			"relative":        "%s",
			"proc self root":  "/proc/self/root" + w.ws + "/%s",
			"link to the ws":  wslink + "/%s",
			"dot-dot in path": w.ws + "/../" + filepath.Base(w.ws) + "/%s",
		}
		for form, pattern := range forms {
			for _, flag := range []string{"--events", "--env-file"} {
				file := map[string]string{"--events": "events.jsonl", "--env-file": "vars.env"}[flag]
				args := append(append([]string{}, w.u.prefix...), agentrun, "sandbox", flag, fmt.Sprintf(pattern, file), "--", "sh", "-c", "echo ${HOST_SECRET:-none}")
				c := exec.Command(args[0], args[1:]...)
				c.Dir = w.ws // no --cwd: the workspace is the current directory
				c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home}
				out, _ := c.CombinedOutput()
				if code := c.ProcessState.ExitCode(); code != 125 || !strings.Contains(string(out), "symbolic link") {
					t.Errorf("%s %s: exit %d, %s", flag, form, code, out)
				}
				if strings.Contains(string(out), secret) {
					t.Errorf("%s %s: the host file reached the agent", flag, form)
				}
				if b, _ := os.ReadFile(victim); !strings.Contains(string(b), secret) {
					t.Fatalf("%s %s: the host file was truncated: %q", flag, form, b)
				}
			}
		}
	})
}

// TestWorkspaceThroughAPlantedLink: an earlier run's agent replaced a
// directory of its workspace with a link (rm -rf svc; ln -s /usr/local/sbin
// svc); a later --cwd naming that directory must not make the link's
// target the writable workspace.
func TestWorkspaceThroughAPlantedLink(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		target := filepath.Join(w.outside, "keys") // a directory of the caller's, not a system one
		for name, to := range map[string]string{"svc": "/usr/local/sbin", "lib": target} {
			link := filepath.Join(w.ws, name)
			if err := os.Symlink(to, link); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := w.runRaw(t, []string{"--cwd", link}, "sh", "-c", "echo x > planted-by-agent")
			if code != 125 || !strings.Contains(stderr, "goes through the symbolic link "+link) || !strings.Contains(stderr, "pass --cwd with the real path") {
				t.Errorf("--cwd %s (a link to %s): exit %d, %s", link, to, code, stderr)
			}
			if _, err := os.Stat(filepath.Join(to, "planted-by-agent")); err == nil {
				os.Remove(filepath.Join(to, "planted-by-agent"))
				t.Errorf("the agent wrote into %s", to)
			}
		}
		// The real path of a directory works.
		if _, stderr, code := w.runRaw(t, []string{"--cwd", target}, "true"); code != 0 {
			t.Errorf("--cwd %s: exit %d, %s", target, code, stderr)
		}
	})
}

// TestNoSetuidFilesInTheWorkspace: the workspace of a root caller is given
// to the agent through an idmapped mount, so in a root-owned workspace
// (as here for root) what the agent makes is root's on disk; a setuid copy
// of a shell would be a root shell for anyone on the host. Every call that
// sets the bits is refused, and none is left in the workspace.
func TestNoSetuidFilesInTheWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		dir := filepath.Join(w.ws, "setid")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, w.u.uid, w.u.uid); err != nil {
			t.Fatal(err)
		}
		o := w.run(t, nil, nil, probe, "setid", dir)
		lines := strings.Split(o.stdout, "\n")
		if len(lines) < 8 {
			t.Fatalf("probe: %q %s", o.stdout, o.stderr)
		}
		for _, line := range lines {
			if !strings.Contains(line, " denied: ") {
				t.Errorf("%s", line)
			}
		}
		_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s is %v on the host (owner %d)", p, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
			}
			return nil
		})
		// Plain modes still work, and a build's chmod +x.
		if o := w.run(t, nil, nil, "sh", "-c", "cd "+dir+" && echo x > f && chmod 755 f && chmod u+x,g-w f && chmod 1777 . && mkdir d && chmod 750 d && echo OK"); o.stdout != "OK" {
			t.Errorf("ordinary chmod: %q %s", o.stdout, o.stderr)
		}
	})
}

// TestNoDatagramPairToHostSockets is the review's /var/tmp/rev/c/dgram:
// socket(AF_UNIX) is refused, but a datagram socketpair was not, and
// sendto() or connect() with a filesystem address reaches any datagram
// socket on the host (journald, /dev/log).
func TestNoDatagramPairToHostSockets(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		sock := filepath.Join(w.outside, "log.sock")
		l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := os.Chmod(sock, 0o777); err != nil {
			t.Fatal(err)
		}
		o := w.run(t, nil, nil, probe, "dgram", sock)
		if !strings.HasPrefix(o.stdout, "denied: socketpair") {
			t.Errorf("a datagram pair inside: %q", o.stdout)
		}
		l.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 100)
		if n, _, err := l.ReadFrom(buf); err == nil {
			t.Errorf("the host socket received %q from the sandbox", buf[:n])
		}
		if o := w.run(t, nil, nil, probe, "pairs"); o.stdout != "ok 1,5" {
			t.Errorf("stream and seqpacket pairs must stay: %q", o.stdout)
		}
	})
}

// TestNoBPFOrPerf: bpf and perf_event_open are refused by the filter
// (EPERM) before the kernel reads their arguments (EFAULT).
func TestNoBPFOrPerf(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		want := fmt.Sprintf("bpf %d perf_event_open %d", unix.EPERM, unix.EPERM)
		if o := w.run(t, nil, nil, probe, "kernel"); o.stdout != want {
			t.Errorf("%q, want %q", o.stdout, want)
		}
	})
}

// TestRepositoryGitFilesAreReadOnly: .git need not be a directory at the
// top of the workspace. In a linked worktree and in a submodule .git is a
// file ("gitdir: PATH"): rewritten to point at a git directory of the
// agent's with core.fsmonitor set, the host's next `git status` runs the
// agent's command (as root for a root caller). A workspace that is a
// subdirectory of a checkout has no .git at all, and one the agent makes
// there takes over `git status` in it. Each attack is made inside; the
// host then runs git where the user would.
func TestRepositoryGitFilesAreReadOnly(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		git := func(dir string, args ...string) {
			t.Helper()
			c := exec.Command("git", append([]string{"-C", dir}, args...)...)
			c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "GIT_CONFIG_NOSYSTEM=1",
				"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		// A git directory of the agent's whose fsmonitor leaves a mark.
		evil := func(dir, mark string) string {
			return fmt.Sprintf(`mkdir -p %[1]s/objects %[1]s/refs && echo 'ref: refs/heads/main' > %[1]s/HEAD && `+
				`printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch %[2]s; false"\n' > %[1]s/config`, dir, mark)
		}
		type attack struct {
			name   string
			setup  func(ws string) (cwd, gitCwd string) // the workspace, and where the user runs git
			inside func(mark string) string
		}
		attacks := []attack{
			{"linked worktree", func(ws string) (string, string) {
				main := filepath.Join(w.outside, "main")
				git(w.outside, "init", "-q", "-b", "main", main)
				git(main, "commit", "-q", "--allow-empty", "-m", "x")
				git(main, "worktree", "add", "-q", filepath.Join(ws, "wt"))
				return filepath.Join(ws, "wt"), filepath.Join(ws, "wt")
			}, func(mark string) string { return evil("evil", mark) + " && printf 'gitdir: evil\\n' > .git" }},
			{"submodule", func(ws string) (string, string) {
				git(ws, "init", "-q", "-b", "main")
				if err := os.MkdirAll(filepath.Join(ws, ".git", "modules", "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, "sub", ".git"), []byte("gitdir: ../.git/modules/sub\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return ws, filepath.Join(ws, "sub")
			}, func(mark string) string { return evil("evil", mark) + " && printf 'gitdir: ../evil\\n' > sub/.git" }},
			{"subdirectory of a checkout", func(ws string) (string, string) {
				git(ws, "init", "-q", "-b", "main")
				if err := os.MkdirAll(filepath.Join(ws, "svc"), 0o755); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(ws, "svc"), filepath.Join(ws, "svc")
			}, func(mark string) string { return evil(".git", mark) }},
		}
		for i, a := range attacks {
			ws := filepath.Join(w.ws, fmt.Sprintf("case%d", i))
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			cwd, gitCwd := a.setup(ws)
			chownAll(t, w.ws, w.u.uid)
			chownAll(t, w.outside, w.u.uid)
			mark := filepath.Join(w.outside, fmt.Sprintf("PWNED-%d", i))
			_, stderr, code := w.runRaw(t, []string{"--cwd", cwd}, "sh", "-c", a.inside(mark)+" && echo DONE")
			if code == 0 {
				t.Errorf("%s: the agent's attack went through (%s)", a.name, stderr)
			}
			if code == 125 {
				t.Fatalf("%s: the sandbox did not run: %s", a.name, stderr)
			}
			// The user's next git command on the host (root trusts any
			// owner here, as a root caller in its own workspace would).
			c := exec.Command("git", "-c", "safe.directory=*", "-C", gitCwd, "status", "--short")
			c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "GIT_CONFIG_NOSYSTEM=1"}
			_ = c.Run()
			if _, err := os.Stat(mark); err == nil {
				t.Errorf("%s: git status on the host ran the agent's fsmonitor", a.name)
			}
		}
		// The placeholder of the subdirectory case is gone after the run.
		if _, err := os.Lstat(filepath.Join(w.ws, "case2", "svc", ".git")); err == nil {
			t.Errorf("a .git stayed in the subdirectory after the run (the placeholder or the agent's)")
		}
		// --writable-git keeps today's meaning: nothing is protected.
		ws := filepath.Join(w.ws, "case0", "wt")
		if _, stderr, code := w.runRaw(t, []string{"--cwd", ws, "--writable-git"}, "sh", "-c", "echo x >> .git"); code != 0 {
			t.Errorf("--writable-git: exit %d, %s", code, stderr)
		}
	})
}

// TestWorkspaceOwnersCredentialsAreDenied: root (or a user the project is
// shared with) works in another user's project. That user's credentials are
// as secret as the caller's own, and files such as ~/.npmrc are often
// readable by all: the deny list covers the workspace owner's home too, and
// that home itself is no workspace. The owner is a user of a private
// /etc/passwd (unshare -m and a bind mount), so that the host's stays as it
// is.
func TestWorkspaceOwnersCredentialsAreDenied(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		const aliceUID = 4242
		alice := filepath.Join(w.outside, "alice")
		proj := filepath.Join(alice, "proj")
		for rel, content := range map[string]string{".npmrc": secret, ".aws/credentials": secret, "proj/main.go": "package main"} {
			p := filepath.Join(alice, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		chownAll(t, alice, aliceUID)
		if err := os.Chmod(proj, 0o777); err != nil {
			t.Fatal(err)
		} // shared with the caller
		hostPasswd, _ := os.ReadFile("/etc/passwd")
		passwd := filepath.Join(w.outside, "passwd")
		if err := os.WriteFile(passwd, append(hostPasswd, fmt.Sprintf("alice:x:%d:%d::%s:/bin/sh\n", aliceUID, aliceUID, alice)...), 0o644); err != nil {
			t.Fatal(err)
		}
		run := func(cwd string, cmd ...string) (string, string, int) {
			args := append([]string{"unshare", "-m", "--", "sh", "-c", `mount --bind "$0" /etc/passwd && exec "$@"`, passwd},
				append(append(append([]string{}, w.u.prefix...), agentrun, "sandbox", "--cwd", cwd, "--"), cmd...)...)
			c := exec.Command(args[0], args[1:]...)
			c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home}
			var stdout, stderr bytes.Buffer
			c.Stdout, c.Stderr = &stdout, &stderr
			_ = c.Run()
			return strings.TrimSpace(stdout.String()), stderr.String(), c.ProcessState.ExitCode()
		}
		for _, f := range []string{".npmrc", ".aws/credentials"} {
			out, stderr, code := run(proj, probe, "read", filepath.Join(alice, f))
			if code != 0 || !strings.HasPrefix(out, "denied:") {
				t.Errorf("the workspace owner's %s: exit %d, %q %s", f, code, out, stderr)
			}
		}
		if _, stderr, code := run(alice, "true"); code != 125 || !strings.Contains(stderr, "holds the home "+alice) {
			t.Errorf("the workspace owner's home as workspace: exit %d, %s", code, stderr)
		}
	})
}
