// Package runner runs one agent: it validates the request, launches the
// runtime CLI through its adapter, feeds every raw line through the
// aggregator, enforces the timeout and the turn and token limits, and ends
// the event stream with the end event. The `agentrun run` and
// `agentrun translate` verbs are thin shells around it.
package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/internal/safefile"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sandbox"
)

// Options is one `agentrun run`: its command line (podcontract.RunFlags,
// the flags a Pod's controller renders) and what the caller adds.
type Options struct {
	podcontract.RunFlags
	// Grace is how long a runtime gets after SIGINT before it is killed.
	Grace time.Duration
	// Started is when agentrun began parsing its command line, where
	// end.duration_ms counts from (the time of Run when zero).
	Started time.Time
	// OutputLost, when set, learns of each output of the run that could
	// not be written (a --raw write failed); the run itself goes on.
	OutputLost func(error)
	// TraceID is the run's OpenTelemetry trace id when it exports
	// telemetry (start.trace_id and the end summary); "" without.
	TraceID string
}

// DefaultGrace lets a CLI write its closing result after SIGINT; claude-code
// needs well under a second, node-based CLIs a little more.
const DefaultGrace = 10 * time.Second

// prepared is a validated request.
type prepared struct {
	runtime adapters.Runtime
	cwd     string             // the workspace's name
	ws      *sandbox.Workspace // the workspace, held open
	iso     *isolation
	creds   *creds      // --credential, nil without
	env     [][2]string // the agent's variables: --pass-env, then --env-file, then --env
	// named are how many of env, from the end, the user set by value
	// (--env-file and --env): start.env lists only those.
	named int
	spec  adapters.LaunchSpec
}

// rejection is a request error: it ends the run as "rejected" with a detail
// that says how to fix it.
type rejection struct{ msg string }

func (r rejection) Error() string { return r.msg }

func reject(format string, args ...any) error { return rejection{fmt.Sprintf(format, args...)} }

// MaxPrompt bounds a prompt from stdin or --prompt-file: far above any
// task (a ConfigMap holds at most 1 MiB), it keeps a runaway pipe from
// filling the runner's memory.
const MaxPrompt = 16 << 20

// ReadPrompt reads a prompt from r (stdin, for the prompt "-"), at most
// MaxPrompt bytes.
func ReadPrompt(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxPrompt+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxPrompt {
		return "", fmt.Errorf("the prompt is longer than %d MiB", MaxPrompt>>20)
	}
	return string(b), nil
}

// readPromptFile reads --prompt-file, not through a link an agent planted
// in the workspace cwd.
func readPromptFile(path, cwd string) (string, error) {
	b, err := FilesFor(cwd).ReadFile(path, MaxPrompt)
	switch {
	case errors.Is(err, safefile.ErrTooLarge):
		return "", reject("--prompt-file %s is longer than %d MiB: shorten the prompt, or have the agent read a file in its workspace", path, MaxPrompt>>20)
	case errors.Is(err, fs.ErrNotExist):
		return "", reject("--prompt-file %s: no such file; pass the path of the file that holds the prompt", path)
	case err != nil:
		return "", reject("--prompt-file %s: %v; pass a readable file that holds the prompt", path, errCause(err))
	}
	return string(b), nil
}

// prepare validates o without touching the runtime.
func prepare(o Options) (_ *prepared, err error) {
	rt, err := adapters.Lookup(o.Runtime)
	if err != nil {
		return nil, reject("--runtime: %v; pass one of %s", err, strings.Join(adapters.Names(), ", "))
	}
	if o.PromptFile != "" {
		if o.Prompt != "" {
			return nil, reject("--prompt-file %s and a prompt argument: give the prompt once, in the file or as the argument", o.PromptFile)
		}
		if o.Prompt, err = readPromptFile(o.PromptFile, o.Cwd); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(o.Prompt) == "" {
		if o.PromptFile != "" {
			return nil, reject("--prompt-file %s is empty: write the task into it", o.PromptFile)
		}
		return nil, reject("no prompt: pass the prompt as the last argument, - to read it from stdin, or --prompt-file FILE, for example: agentrun run --runtime %s \"fix the failing test\"", o.Runtime)
	}
	switch {
	case o.Timeout < 0:
		return nil, reject("--timeout must be a positive number of seconds (or 0 for none)")
	case o.MaxTurns < 0:
		return nil, reject("--max-turns must be a positive number (or 0 for none)")
	case o.MaxTokens < 0:
		return nil, reject("--max-tokens must be a positive number (or 0 for none)")
	}
	p, err := prepareWorkspace(o.Cwd, o.EnvFile, o.Env, o.PassEnv, o.SandboxFlags)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	p.runtime = rt
	p.iso.local = localURLs(p.env)
	if o.InPod {
		// A Pod's loopback and own addresses hold agentrun's servers.
		p.iso.policy.RefuseLocal = true
		if err := refuseLocalInPod(p.iso, o.AddHosts); err != nil {
			return nil, err
		}
	}
	files := p.files()
	for _, img := range o.Images {
		f, err := files.Open(img)
		if err != nil {
			return nil, reject("--image %s: not a readable file (%v); pass the path of a PNG, JPEG, GIF or WebP image", img, errCause(err))
		}
		f.Close()
	}
	if o.Resume != "" && o.SessionDir == "" {
		return nil, reject("--resume needs --session-dir: pass the directory the session was saved in")
	}
	if o.Resume != "" && !adapters.ValidSessionID(o.Resume) {
		return nil, reject("--resume %q is not a session id (letters, digits, - and _): use an id from a previous end.session_id", o.Resume)
	}
	if o.SessionDir != "" {
		if err := files.MkdirAll(o.SessionDir, 0o700); err != nil {
			return nil, reject("--session-dir %s: %v; pass a writable directory", o.SessionDir, err)
		}
		if err := p.iso.hideSessions(o.SessionDir, p.cwd); err != nil {
			return nil, err
		}
	}
	if o.Resume != "" {
		f, err := files.Open(sessionFile(o.SessionDir, o.Runtime, o.Resume))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, reject("--resume %s: no %s session with that id in --session-dir %s; use an id from a previous end.session_id", o.Resume, o.Runtime, o.SessionDir)
		}
		if err != nil {
			return nil, reject("--resume %s: %v", o.Resume, err)
		}
		f.Close()
	}
	if p.creds, err = prepareCreds(o, p); err != nil {
		return nil, err
	}
	p.spec = adapters.LaunchSpec{Prompt: o.Prompt, Images: o.Images, Model: o.Model,
		NoSubagents: o.NoSubagents, Cwd: p.cwd, Resume: o.Resume}
	return p, nil
}

// prepareWorkspace validates what `run` and `sandbox` share: the working
// directory, the environment and the isolation flags. The working
// directory is opened here once and held (see sandbox.Workspace): the
// checks and the sandbox's mounts apply to that directory, wherever its
// path leads meanwhile.
func prepareWorkspace(cwd, envFile string, env, passEnv []string, so podcontract.SandboxFlags) (_ *prepared, err error) {
	sandboxed := so.Sandbox == sandbox.Bubblewrap || so.Sandbox == "" && defaultSandbox() == sandbox.Bubblewrap
	if sandboxed {
		sandbox.PrefetchHostIDs() // a root caller's drop needs them (read meanwhile)
	}
	ws, err := openWorkspace(cwd, sandboxed)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			ws.Close()
		}
	}()
	cwd = ws.Path
	iso, err := newIsolation(so, ws)
	if err != nil {
		return nil, err
	}
	p := &prepared{cwd: cwd, ws: ws, iso: iso}
	passed, err := passedEnv(passEnv)
	if err != nil {
		return nil, err
	}
	p.env = passed
	if envFile != "" {
		vars, err := readEnvFile(p.files(), envFile)
		if err != nil {
			return nil, reject("%v; fix the file or drop --env-file", err)
		}
		p.env = append(p.env, vars...)
		p.named += len(vars)
	}
	for _, kv := range env {
		k, v, err := parseEnv(kv)
		if err != nil {
			return nil, reject("%v", err)
		}
		p.env = append(p.env, [2]string{k, v})
		p.named++
	}
	return p, nil
}

// openWorkspace opens the working directory: the current directory where
// it really is (the kernel's name, not $PWD, which keeps the links a shell
// went through: a caller who named no path is not refused for a link in
// it), or --cwd, which in the sandbox must be named by its real path (a
// relative one against the kernel's name of the current directory).
func openWorkspace(cwd string, sandboxed bool) (*sandbox.Workspace, error) {
	if cwd == "" {
		ws, err := sandbox.CurrentWorkspace()
		if err != nil {
			return nil, reject("cannot open the current directory (%v); pass --cwd DIR", errCause(err))
		}
		return ws, nil
	}
	given := cwd
	if !filepath.IsAbs(given) {
		wd, err := syscall.Getwd()
		if err != nil {
			return nil, reject("cannot read the current directory (%v); pass --cwd with an absolute path", err)
		}
		given = filepath.Join(wd, given)
	}
	given = filepath.Clean(given)
	path := given
	if !sandboxed {
		// Nothing is mounted without a sandbox: the caller's links lead
		// where they lead.
		var err error
		if path, err = filepath.EvalSymlinks(given); err != nil {
			return nil, reject("--cwd %s: %v; pass an existing directory", cwd, errCause(err))
		}
	}
	ws, err := sandbox.OpenWorkspace(path)
	var link *sandbox.LinkError
	switch {
	case errors.As(err, &link):
		// A link on the way may be one an agent planted in an earlier
		// workspace (svc -> /usr/local/sbin): the directory handed to the
		// agent is the one the caller named, not where a link leads.
		real, rerr := filepath.EvalSymlinks(given)
		if rerr != nil {
			real = "(unresolved: " + errCause(rerr).Error() + ")"
		}
		return nil, reject("the working directory %s goes through the symbolic link %s (to %s), which the agent of an earlier run may have planted: pass --cwd with the real path %s", given, link.Link, link.Target, real)
	case errors.Is(err, syscall.ENOTDIR):
		return nil, reject("--cwd %s is not a directory; pass an existing directory", cwd)
	case err != nil:
		return nil, reject("--cwd %s: %v; pass an existing directory", cwd, errCause(err))
	}
	return ws, nil
}

// files opens the files the run reads and writes (see FilesFor); the
// workspace is known by its descriptor too, whatever its path leads to.
func (p *prepared) files() safefile.Guard {
	if p.cwd == "/" {
		return safefile.Guard{}
	}
	return safefile.Guard{Untrusted: []string{p.cwd, p.ws.ProcPath()}}
}

// close releases the workspace.
func (p *prepared) close() {
	if p != nil {
		p.ws.Close()
	}
}

// envNames lists the names of the variables set with --env and --env-file
// in first-seen order, for start.env (--pass-env names are not listed:
// start.env tells what the caller set for this run).
func (p *prepared) envNames() []string {
	names := []string{}
	seen := map[string]bool{}
	for _, kv := range p.env[len(p.env)-p.named:] {
		if !seen[kv[0]] {
			seen[kv[0]] = true
			names = append(names, kv[0])
		}
	}
	return names
}

func resolveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// FilesFor opens the files a run reads and writes (--events, --raw,
// --env-file, images, sessions) so that nothing an agent planted in the
// workspace cwd ("" for the current directory) is followed: an earlier
// run's agent may have left a link where the event log will be written.
func FilesFor(cwd string) safefile.Guard {
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	if r, err := resolveDir(cwd); err == nil {
		cwd = r
	}
	if cwd == "" || cwd == "/" {
		return safefile.Guard{}
	}
	return safefile.Guard{Untrusted: []string{cwd}}
}

// errCause is the cause of a path error, without the path the message
// already names.
func errCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
