// Package sandbox runs a command inside bubblewrap the way agentrun runs an
// agent: everything read-only but the workspace and a private /tmp, a deny
// list of credential paths that read as nothing, a minimal environment, no
// network but the runner's filter proxy (passed in over a socket, see
// ../shared/design/SANDBOX.md, "fdpass"), and a seccomp filter against
// filesystem Unix sockets.
package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Modes of --sandbox.
const (
	Bubblewrap = "bubblewrap"
	None       = "none"
)

// InitPath is where the runner's own binary is bound inside the sandbox to
// act as the first process (the fdpass helper). It lives in the sandbox's
// private /tmp so that bwrap never creates a mount point on the host.
const InitPath = "/tmp/.agentrun/agentrun"

// ProxyPort is where the filter proxy listens inside the sandbox, on
// 127.0.0.1 and ::1 of the sandbox's own network namespace.
const ProxyPort = 3128

// ProcMode is how /proc is provided.
type ProcMode int

const (
	// FreshProc mounts a new /proc for the sandbox's pid namespace: the
	// agent sees only its own processes.
	FreshProc ProcMode = iota
	// HostProc binds the outer /proc read-only, for containers whose masked
	// /proc forbids a new mount (see TESTENV.md). The runner is then made
	// non-dumpable so its environment and memory stay unreadable.
	HostProc
)

// DefaultDenyRead is the deny list every run starts with, under home.
func DefaultDenyRead(home string) []string {
	rel := []string{".ssh", ".aws", ".gnupg", ".kube", ".docker", ".config/gcloud", ".azure",
		".netrc", ".npmrc", ".pypirc", ".git-credentials"}
	out := make([]string, 0, len(rel)+1)
	for _, r := range rel {
		out = append(out, filepath.Join(home, r))
	}
	return append(out, "/var/run/secrets/kubernetes.io")
}

// fileLike are default deny entries that are files, not directories, when
// they do not exist yet.
var fileLike = map[string]bool{".netrc": true, ".npmrc": true, ".pypirc": true, ".git-credentials": true}

// Config is one sandbox.
type Config struct {
	Workspace string   // the writable working directory, absolute and resolved
	Writable  []string // further writable paths (the run's state directory)
	ReadOnly  []string // paths that must be visible even under /tmp (the CLI, its files)
	DenyRead  []string // in order: defaults, then --deny-read
	NoNetwork bool     // --network none: no proxy inside at all
	Proc      ProcMode
	// Init is the first program inside, bound at InitPath: the small
	// agentrun-sandbox-init, or agentrun itself with InitVerb (InitUsesVerb).
	Init         string
	InitUsesVerb bool
}

// Deny is one prepared deny-read entry.
type Deny struct {
	Path  string
	IsDir bool
}

// Args is the bubblewrap command line up to and including "--", without the
// command. It is a pure function of cfg and the prepared deny entries.
func Args(bwrap string, cfg Config, deny []Deny, seccompFD int) []string {
	a := []string{bwrap,
		"--die-with-parent",
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--cap-drop", "ALL",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
	}
	switch cfg.Proc {
	case HostProc:
		a = append(a, "--ro-bind", "/proc", "/proc")
	default:
		a = append(a, "--proc", "/proc")
	}
	// A private /tmp hides the host's; whatever the run needs from under
	// /tmp is bound back after it.
	a = append(a, "--tmpfs", "/tmp")
	for _, p := range cfg.Writable {
		a = append(a, "--bind", p, p)
	}
	a = append(a, "--bind", cfg.Workspace, cfg.Workspace)
	for _, p := range cfg.ReadOnly {
		if !within(p, cfg.Workspace) {
			a = append(a, "--ro-bind", p, p)
		}
	}
	// After the workspace, which may be /tmp itself.
	a = append(a, "--ro-bind", cfg.Init, InitPath)
	// Deny entries come last so that they cover anything bound above,
	// the workspace included.
	for _, d := range deny {
		if d.IsDir {
			a = append(a, "--perms", "0000", "--tmpfs", d.Path, "--remount-ro", d.Path)
		} else {
			a = append(a, "--ro-bind", "/dev/null", d.Path)
		}
	}
	a = append(a, "--chdir", cfg.Workspace, "--seccomp", itoa(seccompFD), "--")
	return a
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// PrepareDeny turns deny paths into mount entries. A path that does not
// exist gets a placeholder on the host (an empty directory, or an empty file
// for the known credential files), so that the sandbox mounts over it and a
// file created there during the run stays hidden. Placeholders are left in
// place: removing one while another run's sandbox is mounted over it would
// silently drop that run's protection (the kernel detaches a mount whose
// mount point is deleted in another namespace), and an empty ~/.ssh or
// ~/.netrc is harmless. Where this user may not create or see the path,
// neither can the run, and it is left alone. Paths under /tmp need no
// placeholder: the sandbox has its own /tmp.
func PrepareDeny(paths []string) ([]Deny, error) {
	var out []Deny
	for _, p := range paths {
		p = filepath.Clean(p)
		if p == "/tmp" || strings.HasPrefix(p, "/tmp/") {
			if st, err := os.Stat(p); err == nil {
				out = append(out, Deny{Path: p, IsDir: st.IsDir()})
			}
			continue
		}
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrPermission) {
			continue
		}
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err != nil {
			err := makePlaceholder(p, fileLike[filepath.Base(p)])
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
				continue
			}
			// Another run may have made it meanwhile.
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, err
			}
			if st, err = os.Stat(p); err != nil {
				return nil, err
			}
		}
		// bwrap mounts inside the new root, where an absolute symlink on the
		// way (/var/run -> /run) would point out of it: mount at the real path.
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		out = append(out, Deny{Path: real, IsDir: st.IsDir()})
	}
	return out, nil
}

// makePlaceholder creates p and its missing parents. Parents are
// world-traversable, as such directories usually are, so that one made by
// root does not lock other users out; p itself is private.
func makePlaceholder(p string, isFile bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if isFile {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		return f.Close()
	}
	return os.Mkdir(p, 0o700)
}
