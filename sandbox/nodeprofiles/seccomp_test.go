package nodeprofiles

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write the chart's profile files")

// chartFile is where the chart keeps a profile for its installer.
func chartFile(name string) string {
	return filepath.Join("..", "..", "charts", "agentrun", "files", "profiles", name)
}

func TestProfileFilesAreCurrent(t *testing.T) {
	for name, want := range map[string][]byte{"agentrun-bwrap.json": SeccompJSON(), "agentrun-bwrap.apparmor": AppArmor()} {
		path := chartFile(name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%v): run go test ./sandbox/nodeprofiles -update", path, err)
		}
	}
}

func TestProfileShape(t *testing.T) {
	p := Seccomp()
	allowed := p.Syscalls[0].Names
	for name := range ForSandbox {
		if !slices.Contains(allowed, name) {
			t.Errorf("%s is not allowed", name)
		}
	}
	// What the runtime's default refuses stays refused: administering
	// the machine, other namespaces than bubblewrap's own.
	for _, refused := range []string{"setns", "init_module", "finit_module", "kexec_load", "bpf", "perf_event_open", "keyctl",
		"add_key", "request_key", "swapon", "reboot", "settimeofday", "open_by_handle_at", "userfaultfd", "chroot", "clone3"} {
		if slices.Contains(allowed, refused) {
			t.Errorf("%s must not be allowed", refused)
		}
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" || *p.DefaultErrnoRet != 1 || p.Syscalls[1].Names[0] != "clone3" || *p.Syscalls[1].ErrnoRet != 38 {
		t.Errorf("profile %+v", p)
	}
}

// TestBubblewrapNeedsExactlyThese runs agentrun's sandbox the way an agent
// Pod does (an unprivileged user, no_new_privs, the container's seccomp
// profile applied by its runtime; with the container's /proc masked, so
// the outer /proc is bound) under the profile: bubblewrap builds its
// sandbox and a command runs. Without any one of the calls the profile
// adds for the sandbox, it cannot: the profile holds exactly what
// bubblewrap needs.
func TestBubblewrapNeedsExactlyThese(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Fatalf("the functional check resolves syscalls for amd64; this is %s", runtime.GOARCH)
	}
	dir := buildAll(t)
	run := func(t *testing.T, p Profile) (string, error) {
		t.Helper()
		prof := filepath.Join(dir, fmt.Sprintf("profile-%d.json", len(p.Syscalls[0].Names)))
		b, _ := jsonIndent(p)
		if err := os.WriteFile(prof, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ws, err := os.MkdirTemp("/var/tmp", "agentrun-profile-ws-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(ws)
		if err := os.Chown(ws, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
			filepath.Join(dir, "seccompexec"), prof, "--", filepath.Join(dir, "agentrun"), "sandbox", "--cwd", ws, "--network", "none",
			"--", "sh", "-c", "echo inside > made && cat made")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "AGENTRUN_SANDBOX_PROC=host"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(t, Seccomp()); err != nil || strings.TrimSpace(out) != "inside" {
		t.Fatalf("bubblewrap under the profile: %v\n%s", err, out)
	}
	for name := range ForSandbox {
		t.Run("without "+name, func(t *testing.T) {
			if out, err := run(t, Seccomp(name)); err == nil {
				t.Errorf("the sandbox started without %s, so the profile need not allow it:\n%s", name, out)
			}
		})
	}
}

// TestProfileRefusesEscapeRoutes: the profile sits at a well-known path on
// every node, and Pod Security accepts any Localhost profile, so any Pod
// may name it. It lets a process create user namespaces (bubblewrap needs
// them); what usually turns one into kernel privilege, nf_tables and other
// netlink families, raw packet sockets, stays refused. (The admission
// policy the chart ships keeps other Pods from naming it at all.)
func TestProfileRefusesEscapeRoutes(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Fatalf("the functional check resolves syscalls for amd64; this is %s", runtime.GOARCH)
	}
	dir := buildAll(t)
	prof := filepath.Join(dir, "profile.json")
	if err := os.WriteFile(prof, SeccompJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, unprivileged := range []bool{false, true} {
		// A user namespace with a network namespace, as root of both:
		// the profile allows it (bubblewrap's), so the question is what
		// it leads to.
		args := []string{filepath.Join(dir, "seccompexec"), prof, "--", "unshare", "--user", "--map-root-user", "--net", filepath.Join(dir, "profileprobe")}
		if unprivileged {
			args = append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}, args...)
		}
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			got[k] = v
		}
		want := map[string]string{
			"socket unix": "ok", "socket inet": "ok", "socket inet6": "ok", "socket netlink route": "ok",
			"socket netlink netfilter": "EPERM", "socket netlink xfrm": "EPERM", "socket packet": "EPERM", "socket vsock": "EPERM", "socket alg": "EPERM",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("unprivileged=%v: %s: %s, want %s\n%s", unprivileged, k, got[k], v, out)
			}
		}
	}
}

func buildAll(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "agentrun-profile-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for out, pkg := range map[string]string{"agentrun": "./cmd/agentrun", "agentrun-sandbox-init": "./cmd/agentrun-sandbox-init",
		"seccompexec": "./sandbox/nodeprofiles/internal/seccompexec", "profileprobe": "./sandbox/nodeprofiles/internal/profileprobe"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		build.Dir, build.Stderr = filepath.Join("..", ".."), os.Stderr
		if err := build.Run(); err != nil {
			t.Fatalf("build %s: %v", pkg, err)
		}
	}
	return dir
}
