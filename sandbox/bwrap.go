// Package sandbox runs a command inside bubblewrap the way agentrun runs an
// agent: everything read-only but the workspace and a private /tmp, a deny
// list of credential paths that read as nothing, a minimal environment, no
// network but the runner's filter proxy (passed in over a socket:
// docs/sandbox.md, "How the proxy reaches the sandbox"), and a seccomp
// filter against filesystem Unix sockets.
package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/sandbox/initproc"
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
const ProxyPort = initproc.ProxyPort

// ProcMode is how /proc is provided.
type ProcMode int

const (
	// FreshProc mounts a new /proc for the sandbox's pid namespace: the
	// agent sees only its own processes.
	FreshProc ProcMode = iota
	// HostProc binds the outer /proc read-only, for containers whose masked
	// /proc forbids a new mount (docs/sandbox.md, "/proc in a container").
	// The runner is then made
	// non-dumpable so its environment and memory stay unreadable.
	HostProc
)

// The default deny list holds the places where tools keep credentials of
// their own, chosen by one rule: a file or directory whose main purpose is
// to hold a secret (keys, tokens, passwords) of a widely used tool, plus the
// shell and REPL histories, where commands often carry tokens. Files that
// mix settings with credentials (~/.m2/settings.xml, ~/.gradle) are left
// to --deny-read, since builds need their settings. The agent's own CLI
// never needs these: it runs with a private HOME and its own config
// directory.
var (
	// denyHome are relative to each home (see DefaultDenyRead); "/" ends
	// the directories, which matters only for a placeholder.
	denyHome = []string{
		// keys and cloud credentials
		".ssh/", ".aws/", ".gnupg/", ".kube/", ".docker/", ".config/gcloud/", ".azure/", ".oci/", ".config/doctl/",
		".terraform.d/", ".s3cfg", ".boto", ".config/rclone/",
		// code hosts, registries and package managers
		".netrc", ".npmrc", ".pypirc", ".git-credentials", ".config/gh/", ".config/glab-cli/", ".config/hub",
		".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".config/containers/auth.json",
		// secret stores and databases
		".vault-token", ".password-store/", ".config/op/", ".pgpass", ".my.cnf",
		// coding agents' own logins and settings
		".claude/", ".claude.json", ".codex/", ".pi/", ".gemini/", ".cache/huggingface/token",
		// histories (hidden when they exist: see placeholderFor)
		".bash_history", ".zsh_history", ".history", ".sh_history", ".local/share/fish/fish_history",
		".python_history", ".node_repl_history", ".psql_history", ".mysql_history", ".sqlite_history", ".rediscli_history",
	}
	// denyAbsolute are the tokens a Pod or container is given: Kubernetes
	// service accounts, the workload identities of EKS (IRSA), Azure and
	// projected tokens (all under /var/run/secrets), and Docker's secrets.
	denyAbsolute = []string{"/var/run/secrets/", "/run/secrets/"}
)

// placeholder is what a missing deny path gets on the host (see prepareDeny).
type placeholder int

const (
	placeholderDir placeholder = iota
	placeholderFile
	placeholderNone
)

// defaultPlaceholders are the kinds of the default entries by their
// relative name: directories end with "/"; histories get none (a shell
// makes them at will, and a dozen empty ones in every home would be
// clutter), so a history that appears during a run is not hidden.
var defaultPlaceholders = func() map[string]placeholder {
	m := map[string]placeholder{}
	for _, rel := range denyHome {
		switch {
		case strings.HasSuffix(rel, "/"):
			m[strings.TrimSuffix(rel, "/")] = placeholderDir
		case strings.HasSuffix(rel, "history"):
			m[rel] = placeholderNone
		default:
			m[rel] = placeholderFile
		}
	}
	return m
}()

// placeholderFor is the placeholder of a deny path: by its default entry,
// else (--deny-read) a directory.
func placeholderFor(p string) placeholder {
	for rel, kind := range defaultPlaceholders {
		if strings.HasSuffix(p, "/"+rel) {
			return kind
		}
	}
	return placeholderDir
}

// DefaultDenyRead is the deny list every run starts with: the entries of
// denyHome under each home (in order, without repeats), then denyAbsolute.
func DefaultDenyRead(homes ...string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, h := range homes {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		for _, r := range denyHome {
			add(filepath.Join(h, r))
		}
	}
	for _, p := range denyAbsolute {
		add(filepath.Clean(p))
	}
	return out
}

// Config is one sandbox.
type Config struct {
	Workspace string // the writable working directory, absolute and resolved
	// Dir is the workspace held open (Workspace is its name): it is
	// mounted by this descriptor, and what is below it (Protect) is opened
	// from it, so that a link swapped in on the way cannot redirect a
	// mount (see Workspace).
	Dir      *Workspace
	Writable []string // further writable paths (the run's state directory)
	ReadOnly []string // paths that must be visible even under /tmp (the CLI, its files)
	DenyRead []string // in order: defaults, then --deny-read
	// Protect is what of the workspace is bound read-only over itself
	// (its repositories' git directories, see ProtectGit), with the
	// directories on its way bound over themselves.
	Protect   GitProtection
	NoNetwork bool // --network none: no proxy inside at all
	Proc      ProcMode
	// Home is the agent's HOME (named in a root caller's /etc/passwd).
	Home string
	// MaxProcs bounds the agent's processes (RLIMIT_NPROC); 0 leaves it.
	MaxProcs uint64
	// Init is the first program inside, bound at InitPath: the small
	// agentrun-sandbox-init, or agentrun itself with InitVerb (InitUsesVerb).
	Init         string
	InitUsesVerb bool
}

// initCommand is the first program inside the sandbox with its verb, if
// any, before its flags.
func (c Config) initCommand(path string) []string {
	if c.InitUsesVerb {
		return []string{path, InitVerb}
	}
	return []string{path}
}

// Deny is one prepared deny-read entry.
type Deny struct {
	Path  string
	IsDir bool
}

// Descriptors bubblewrap receives (ExtraFiles start at 3).
const (
	seccompFD = 4
	usernsFD  = 5 // a root caller's agent user namespace
	passwdFD  = 6
	groupFD   = 7
)

// procReadOnly are the kernel's knobs under a fresh /proc, bound read-only
// over themselves (as container runtimes do): bubblewrap covers them only
// where its own user can write them, which misses root-owned files under a
// directory root cannot write (/proc/sys/kernel/core_pattern).
var procReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"}

// fdMount is a mount of something of the workspace by descriptor: fd is
// its number in bubblewrap, which binds it at dest (--bind-fd, which fails
// when the path it resolves no longer leads to that descriptor).
type fdMount struct {
	fd   int
	dest string
	ro   bool
}

// Args is the bubblewrap command line up to and including "--", without the
// command. It is a pure function of cfg, the prepared deny entries, for a
// root caller the drop (nil otherwise), and the workspace's mounts by
// descriptor: the workspace itself first, then what of it is protected.
func Args(bwrap string, cfg Config, deny []Deny, d *dropped, ws []fdMount) []string {
	a := []string{bwrap, "--die-with-parent"}
	if d != nil {
		a = append(a, "--userns", itoa(usernsFD))
	} else {
		a = append(a, "--unshare-user")
	}
	a = append(a, "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--cap-drop", "ALL")
	if d != nil {
		// For the init's drop to AgentUID, and nothing else.
		a = append(a, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
	}
	a = append(a, "--ro-bind", "/", "/", "--dev", "/dev")
	switch cfg.Proc {
	case HostProc:
		a = append(a, "--ro-bind", "/proc", "/proc")
	default:
		a = append(a, "--proc", "/proc")
		for _, p := range procReadOnly {
			a = append(a, "--ro-bind-try", p, p)
		}
	}
	// A private /tmp hides the host's; whatever the run needs from under
	// /tmp is bound back after it. Sticky and writable for all, as /tmp
	// is: a root caller's tmpfs belongs to bubblewrap's uid 0, not to the
	// agent.
	a = append(a, "--perms", "1777", "--tmpfs", "/tmp")
	// bubblewrap 0.8 makes the directories above a bind 0700 and its own:
	// those on the way to what the agent needs are made searchable first.
	needed := append([]string{cfg.Workspace}, cfg.Writable...)
	for _, p := range cfg.ReadOnly {
		if !within(p, cfg.Workspace) {
			needed = append(needed, p)
		}
	}
	for _, dir := range dirsUnderTmp(needed) {
		a = append(a, "--perms", "0755", "--dir", dir)
	}
	if d != nil {
		for _, m := range d.masks {
			a = append(a, "--tmpfs", m)
		}
		a = append(a, "--perms", "0644", "--ro-bind-data", itoa(passwdFD), "/etc/passwd",
			"--perms", "0644", "--ro-bind-data", itoa(groupFD), "/etc/group")
	}
	for _, p := range cfg.Writable {
		a = append(a, "--bind", p, p)
	}
	bindFD := func(m fdMount) {
		flag := "--bind-fd"
		if m.ro {
			flag = "--ro-bind-fd"
		}
		a = append(a, flag, itoa(m.fd), m.dest)
	}
	if len(ws) > 0 {
		bindFD(ws[0])
	}
	for _, p := range cfg.ReadOnly {
		if !within(p, cfg.Workspace) {
			a = append(a, "--ro-bind", p, p)
		}
	}
	for _, m := range ws[min(1, len(ws)):] {
		bindFD(m)
	}
	// After the workspace, which may be /tmp itself.
	a = append(a, "--ro-bind", cfg.Init, InitPath)
	// Deny entries come last so that they cover anything bound above,
	// the workspace included.
	for _, dn := range deny {
		if dn.IsDir {
			a = append(a, "--perms", "0000", "--tmpfs", dn.Path, "--remount-ro", dn.Path)
		} else {
			a = append(a, "--ro-bind", "/dev/null", dn.Path)
		}
	}
	// The init enters the workspace itself, after its drop: a root
	// caller's bubblewrap may not (the workspace is the agent's).
	a = append(a, "--chdir", "/", "--seccomp", itoa(seccompFD), "--")
	return a
}

// dirsUnderTmp lists the directories strictly between /tmp and each path,
// outermost first, without repeats.
func dirsUnderTmp(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if !strings.HasPrefix(p, "/tmp/") {
			continue
		}
		var chain []string
		for a := filepath.Dir(p); a != "/tmp" && a != "/"; a = filepath.Dir(a) {
			chain = append(chain, a)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if !seen[chain[i]] {
				seen[chain[i]] = true
				out = append(out, chain[i])
			}
		}
	}
	return out
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

// prepareDeny turns deny paths into mount entries. A path that does not
// exist gets a placeholder on the host when its directory exists (an empty
// directory, or an empty file for the known credential files; see
// placeholderFor), so that the sandbox mounts over it and a file created
// there during the run stays hidden. Placeholders are made without
// following links, only where the caller may (or given to the directory's
// owner), and removed when the run ends (placeholders.close; see
// placeholder.go). Where this user may not create or see the path,
// neither can the run, and it is left alone; so is a path the agent could
// not reach anyway (reachable false: a root caller's agent under /root).
// Paths under /tmp need no placeholder: the sandbox has its own /tmp.
func prepareDeny(paths []string, reachable func(string) bool) (_ []Deny, ps *placeholders, err error) {
	var out []Deny
	ps = &placeholders{}
	defer func() {
		if err != nil {
			ps.close()
		}
	}()
	seen := map[string]bool{}
	add := func(real string, dir bool) {
		if !seen[real] {
			seen[real] = true
			out = append(out, Deny{Path: real, IsDir: dir})
		}
	}
	for _, p := range paths {
		p = filepath.Clean(p)
		if reachable != nil && !reachable(p) {
			continue
		}
		if p == "/tmp" || strings.HasPrefix(p, "/tmp/") {
			if st, err := os.Stat(p); err == nil {
				add(p, st.IsDir())
			}
			continue
		}
		real, isDir, err := lockDenyPath(ps, p, placeholderFor(p))
		if err != nil {
			return nil, ps, err
		}
		if real != "" {
			add(real, isDir)
		}
	}
	return out, ps, nil
}

// denyPathTries and denyPathPatience bound the looks at one deny path in
// lockDenyPath. A look fails only when the path went between the look and
// its lock, which is another run's placeholder removed as that run ended,
// or came between the look and the making of a placeholder, which is
// another run's made meanwhile: each means another run started or ended in
// those few system calls. Eight in a row is no coincidence of concurrent
// runs; nor is a path that keeps going for longer than two lock waits
// (whoever may rename in its directory can hold each look's lock for up to
// lockWait, then swap the name: eight such looks delayed a start by 7 s).
const (
	denyPathTries    = 8
	denyPathPatience = 2 * lockWait
)

// lockDenyPath makes the deny path p one the sandbox can mount over for
// the whole run: it holds the existing path (placeholders.hold), or makes
// its placeholder when it is missing (kind), and returns the path to
// mount over as the kernel names it, or "" when there is nothing to hide
// (missing with no placeholder to make, or where this user may not look).
// It looks again when the path went or came meanwhile (concurrent runs
// share placeholders), and fails rather than leave it out of the deny
// list when it never holds still.
func lockDenyPath(ps *placeholders, p string, kind placeholder) (real string, isDir bool, err error) {
	deadline := time.Now().Add(denyPathPatience)
	for try := 0; try < denyPathTries && (try == 0 || time.Now().Before(deadline)); try++ {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrPermission) {
			return "", false, nil
		}
		if err != nil && !os.IsNotExist(err) {
			return "", false, err
		}
		if err != nil {
			if kind == placeholderNone {
				return "", false, nil // nothing to hide, and nothing made
			}
			real, err := ps.make(p, kind == placeholderFile)
			if errors.Is(err, errPlaceholderCame) {
				continue // another run's, made meanwhile: hold it
			}
			return real, kind != placeholderFile, err
		}
		// bwrap mounts inside the new root, where an absolute symlink on
		// the way (/var/run -> /run) would point out of it: mount at the
		// real path.
		real, err := filepath.EvalSymlinks(p)
		if os.IsNotExist(err) {
			continue // gone since the look
		}
		if err != nil {
			return "", false, err
		}
		if kind != placeholderNone {
			if still, err := holdDenyPath(ps, real); err != nil {
				return "", false, err
			} else if !still {
				continue
			}
		}
		return real, st.IsDir(), nil
	}
	return "", false, fmt.Errorf("deny path %q came and went at every look while it was being locked (other runs' placeholders, made and removed, or someone renaming in its directory); run again", p)
}

// holdDenyPath is placeholders.hold; a variable for the test of a deny
// path that keeps going.
var holdDenyPath = (*placeholders).hold
