package runner

import (
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/phases"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/sandbox"
	"github.com/agentrun-dev/agentrun/telemetry"
)

// isolation is a validated podcontract.SandboxFlags for one workspace.
type isolation struct {
	mode     string
	policy   *proxy.Policy
	resolver *proxy.HostResolver
	denyRead []string
	proc     sandbox.ProcMode
	git      sandbox.GitProtection // workspace paths bound read-only (its repositories)
	// gitProtected: the repositories are read-only (no --writable-git).
	gitProtected bool
	maxProcs     int
	// local are the agent's base URLs on the loopback (loopback.go).
	local []localURL
}

func defaultSandbox() string {
	if runtime.GOOS == "linux" {
		return sandbox.Bubblewrap
	}
	return sandbox.None
}

// newIsolation validates the options for the workspace ws; errors are
// rejections.
func newIsolation(o podcontract.SandboxFlags, ws *sandbox.Workspace) (*isolation, error) {
	cwd := ws.Path
	iso := &isolation{mode: o.Sandbox}
	if iso.mode == "" {
		iso.mode = defaultSandbox()
	}
	if iso.mode != sandbox.Bubblewrap && iso.mode != sandbox.None {
		return nil, reject("--sandbox %q: use bubblewrap or none", o.Sandbox)
	}
	policy, err := proxy.NewPolicy(o.Network, o.AllowHosts)
	if err != nil {
		return nil, reject("%v", err)
	}
	iso.policy = policy
	iso.resolver = &proxy.HostResolver{Static: map[string][]netip.Addr{}}
	for _, h := range o.AddHosts {
		name, ip, err := proxy.ParseAddHost(h)
		if err != nil {
			return nil, reject("%v", err)
		}
		iso.resolver.Static[name] = append(iso.resolver.Static[name], ip)
	}
	if o.MaxProcs < 0 {
		return nil, reject("--max-procs must be a positive number (or 0 for the default %d)", podcontract.DefaultMaxProcs)
	}
	iso.maxProcs = o.MaxProcs
	if iso.maxProcs == 0 {
		iso.maxProcs = podcontract.DefaultMaxProcs
	}
	phases.Mark("isolation")
	homes := callerHomes()
	if h := ownerHome(ws.UID); h != "" && !slices.Contains(homes, h) {
		homes = append(homes, h)
	}
	iso.denyRead = sandbox.DefaultDenyRead(homes...)
	for _, p := range o.DenyRead {
		if !filepath.IsAbs(p) {
			return nil, reject("--deny-read %q: give an absolute path", p)
		}
		iso.denyRead = append(iso.denyRead, filepath.Clean(p))
	}
	if iso.mode != sandbox.Bubblewrap {
		return iso, nil
	}
	if err := sandbox.CheckWorkspace(cwd, ws.UID, homes); err != nil {
		return nil, reject("%v", err)
	}
	for _, p := range iso.denyRead {
		if within(cwd, p) {
			return nil, reject("--deny-read %s contains the working directory %s: deny a narrower path or work elsewhere", p, cwd)
		}
		// The agent can rename a parent of anything inside its workspace,
		// which would move the protected file out from under the mount
		// for the next run: secrets do not belong in the workspace.
		if within(p, cwd) {
			return nil, reject("--deny-read %s is inside the working directory %s, where the agent could move it out of reach of the next run's deny list: keep secrets out of the workspace, or work elsewhere", p, cwd)
		}
	}
	if !o.WritableGit {
		phases.Mark("git-search")
		if iso.git, err = sandbox.ProtectGit(ws); err != nil {
			return nil, reject("%v", err)
		}
		iso.gitProtected = true
	}
	return iso, nil
}

// hideSessions adds --session-dir to what the sandbox hides: it holds
// other runs' sessions (their prompts, answers and tool output), which the
// agent could read and, as their owner in a Pod, change. One that holds the
// workspace is refused; one inside it cannot be hidden (the agent could
// move it), and a [note] says so (see notes).
func (i *isolation) hideSessions(dir, cwd string) error {
	if !i.sandboxed() {
		return nil
	}
	abs := sessionDirAbs(dir)
	switch {
	case within(cwd, abs):
		return reject("--session-dir %s contains the working directory %s, where the agent could read and change other runs' sessions: keep the sessions elsewhere", dir, cwd)
	case within(abs, cwd):
		return nil
	}
	i.denyRead = append(i.denyRead, abs)
	return nil
}

// sessionDirAbs is --session-dir where it really is.
func sessionDirAbs(dir string) string {
	abs, _ := filepath.Abs(dir)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// prepareWorkspace readies the workspace ws just before the sandbox
// starts: the read-only placeholders the search asked for (a .git where
// git would otherwise take one the agent made). The returned function
// undoes it after the run, and then warns of each repository the agent
// left in the workspace (see sandbox.LeftRepositories): git run there
// would read a config the agent wrote.
func (i *isolation) prepareWorkspace(ws *sandbox.Workspace, warn func(string)) (func(), error) {
	if !i.sandboxed() || !i.gitProtected {
		return func() {}, nil
	}
	undo, err := sandbox.MakeGitPlaceholders(ws, &i.git)
	if err != nil {
		return nil, err
	}
	return func() {
		undo()
		left, unchecked, complete := sandbox.LeftRepositories(ws, i.git)
		for _, rel := range left {
			warn(fmt.Sprintf("the agent left a git repository at %s: git run there or below reads its config, which can run commands (core.fsmonitor, hooks); "+
				"review or remove it before you run git there (git config --global safe.bareRepository explicit makes git ignore bare ones)", agentNamed(filepath.Join(ws.Path, rel))))
		}
		for _, rel := range unchecked {
			warn(fmt.Sprintf("the agent left %s unreadable, so it could not be checked for git repositories: review it before you run git there or below", agentNamed(filepath.Join(ws.Path, rel))))
		}
		if !complete {
			warn(fmt.Sprintf("the check for git repositories the agent left stopped after %d directories", sandbox.MaxGitSearchDirs))
		}
	}, nil
}

// agentNamed is a path whose names the agent chose, as a warning shows it:
// quoted (Go syntax) when it holds a character that is not graphic, so
// that a name with a newline can neither cut the warning short, and so
// show another path than the one to review, nor add a line of its own
// that passes for agentrun's.
func agentNamed(p string) string {
	for _, r := range p {
		if !strconv.IsGraphic(r) || r == '"' {
			return strconv.Quote(p)
		}
	}
	return p
}

// sandboxed reports whether the agent runs in bubblewrap.
func (i *isolation) sandboxed() bool { return i.mode == sandbox.Bubblewrap }

// network is start.network: the policy is enforced only by the sandbox.
func (i *isolation) network() events.Network {
	return events.Network{Mode: i.policy.Mode, Allow: i.policy.Allow(), Enforced: i.sandboxed()}
}

// startDenyRead is start.deny_read: what the sandbox hides; nothing without one.
func (i *isolation) startDenyRead() []string {
	if !i.sandboxed() {
		return []string{}
	}
	return append([]string{}, i.denyRead...)
}

// notes are the [note] lines a person sees where start is.
func (i *isolation) notes(sessionDir, cwd string) []string {
	if !i.sandboxed() {
		return []string{NoSandboxNote}
	}
	out := append(i.localNotes(), i.git.Notes...)
	if sessionDir != "" && within(sessionDirAbs(sessionDir), cwd) {
		out = append(out, fmt.Sprintf("--session-dir %s is inside the working directory. The agent can read and change the saved sessions", sessionDir))
	}
	return out
}

// sandboxConfig is the bubblewrap set-up for a command in the workspace ws
// whose binary is bin, with the run's private state directory writable.
func (i *isolation) sandboxConfig(ws *sandbox.Workspace, stateDir, bin string) *sandbox.Config {
	cfg := &sandbox.Config{Workspace: ws.Path, Dir: ws, Writable: []string{stateDir}, ReadOnly: visibleUnderTmp(bin),
		DenyRead: i.denyRead, Protect: i.git, NoNetwork: i.policy.Mode == proxy.ModeNone, Proc: i.proc,
		Home: filepath.Join(stateDir, "home"), MaxProcs: uint64(i.maxProcs)}
	cfg.Init, cfg.InitUsesVerb = sandbox.FindInit(selfExe())
	return cfg
}

// prepareHost readies this process for a sandbox that may see it in /proc
// (always so with the outer /proc): a non-dumpable process's environ, mem
// and fds are closed to it. It also picks the first /proc mode to try: a
// fresh one, unless AGENTRUN_SANDBOX_PROC=host asks for the outer /proc
// bound read-only (what a container with a masked /proc gets; this tries
// and tests that mode anywhere).
func (i *isolation) prepareHost() {
	if !i.sandboxed() {
		return
	}
	if os.Getenv("AGENTRUN_SANDBOX_PROC") == "host" {
		i.proc = sandbox.HostProc
	}
	const prSetDumpable = 4
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
}

// env is the agent's environment. In the sandbox it is a minimal base (PATH,
// HOME, LANG, TERM, TMPDIR, the proxy variables), then what the adapter
// needs, then the user's variables; nothing else of agentrun's own
// environment. Without a sandbox the agent inherits agentrun's environment.
func (i *isolation) env(home string, adapterEnv []string, user [][2]string) []string {
	var env []string
	if i.sandboxed() {
		env = []string{
			"PATH=" + getenvOr("PATH", "/usr/local/bin:/usr/bin:/bin"),
			"HOME=" + home,
			"LANG=" + getenvOr("LANG", "C.UTF-8"),
			"TERM=" + getenvOr("TERM", "dumb"),
			"TMPDIR=/tmp",
		}
		if i.policy.Mode != proxy.ModeNone {
			url := fmt.Sprintf("http://127.0.0.1:%d", sandbox.ProxyPort)
			for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "GRPC_PROXY"} {
				env = append(env, k+"="+url, strings.ToLower(k)+"="+url)
			}
		}
	} else {
		// agentrun's own telemetry settings stay agentrun's (the agent
		// could otherwise export spans into the run's trace).
		for _, kv := range os.Environ() {
			if k, _, _ := cutEnv(kv); !telemetry.IsTelemetryVar(k) {
				env = append(env, kv)
			}
		}
	}
	env = append(env, adapterEnv...)
	for _, kv := range user {
		env = append(env, kv[0]+"="+kv[1])
	}
	env = dedupEnv(env)
	if i.sandboxed() && i.policy.Mode != proxy.ModeNone {
		env = i.withNoProxy(env)
	}
	return env
}

// withNoProxy sets NO_PROXY and no_proxy to one value: the sandbox's own
// loopback names (the agent's local servers are reached directly) and what
// the user listed, minus every host the run allows. The CLIs connect
// directly to what NO_PROXY lists, and inside the sandbox only the proxy
// leads out, so an allowed host listed there would be unreachable.
func (i *isolation) withNoProxy(env []string) []string {
	entries := []string{"localhost", "127.0.0.1", "::1"}
	for _, kv := range env {
		k, v, _ := cutEnv(kv)
		if k == "NO_PROXY" || k == "no_proxy" {
			for _, e := range strings.Split(v, ",") {
				if e = strings.TrimSpace(e); e != "" {
					entries = append(entries, e)
				}
			}
		}
	}
	var keep []string
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e] || i.allowsHost(e) || i.leadsToLocalURL(e) {
			continue
		}
		seen[e] = true
		keep = append(keep, e)
	}
	v := strings.Join(keep, ",")
	return dedupEnv(append(env, "NO_PROXY="+v, "no_proxy="+v))
}

// allowsHost reports whether an allow rule could let a connection to this
// NO_PROXY entry through (on any port).
func (i *isolation) allowsHost(entry string) bool {
	host := strings.TrimPrefix(strings.ToLower(entry), ".")
	if h, _, ok := strings.Cut(host, ":"); ok && !strings.Contains(host, "]") && strings.Count(host, ":") == 1 {
		host = h
	}
	host = strings.Trim(host, "[]")
	if a, err := netip.ParseAddr(host); err == nil {
		for _, r := range i.policy.Rules {
			if r.Prefix.IsValid() && r.Prefix.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	for _, r := range i.policy.Rules {
		if host == r.Name || (r.Suffix != "" && (strings.HasSuffix(host, r.Suffix) || "."+host == r.Suffix)) {
			return true
		}
		if r.Prefix.IsValid() {
			for _, a := range i.resolver.Static[host] {
				if r.Prefix.Contains(a) {
					return true
				}
			}
		}
	}
	return false
}

// callerHomes are the homes whose credentials the default deny list
// covers: $HOME, and the home of the caller's passwd entry when it differs
// or HOME is unset (a run started with HOME pointing elsewhere must not
// expose the real one).
func callerHomes() []string {
	var out []string
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		out = append(out, filepath.Clean(h))
	}
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) && !slices.Contains(out, filepath.Clean(u.HomeDir)) {
		out = append(out, filepath.Clean(u.HomeDir))
	}
	return out
}

// ownerHome is the passwd home of the workspace's owner uid, or "": when
// root works in another user's project (/home/alice/proj), alice's ~/.ssh
// is as much a secret as root's own, and her home as little a workspace.
func ownerHome(uid int) string {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil || !filepath.IsAbs(u.HomeDir) || filepath.Clean(u.HomeDir) == "/" {
		return ""
	}
	return filepath.Clean(u.HomeDir)
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func getenvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
