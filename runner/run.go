package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/aggregator"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/format"
	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/records"
	"github.com/agentrun-dev/agentrun/sandbox"
)

// NoSandboxNote is the [note] line of a run without a sandbox.
const NoSandboxNote = "no sandbox (--sandbox none): the agent can read and write everything this user can, see agentrun's environment, and reach any host"

// Run executes one run and returns its end event. The event stream goes to
// out; the runtime's stderr (and agentrun's own warnings) to stderr. The run
// stops with "interrupted" when ctx is cancelled (the caller cancels it on
// SIGINT or SIGTERM).
func Run(ctx context.Context, o Options, out format.Renderer, stderr io.Writer) *events.End {
	started := time.Now()
	agg := aggregator.New(func(e events.Event) error { return out.Event(e) }, time.Now)
	end := func(status string, detail string) *events.End {
		return agg.Finish(aggregator.Outcome{Status: status, Detail: detail, Started: started})
	}
	p, err := prepare(o)
	if err != nil {
		var rj rejection
		if errors.As(err, &rj) {
			return end(events.StatusRejected, rj.msg)
		}
		return end(events.StatusFailed, err.Error())
	}
	bin, err := resolveBinary(p.runtime)
	if err != nil {
		return end(events.StatusFailed, err.Error())
	}
	stateDir, err := os.MkdirTemp("", "agentrun-")
	if err != nil {
		return end(events.StatusFailed, fmt.Sprintf("cannot create the run's state directory: %v", err))
	}
	defer os.RemoveAll(stateDir)

	adapter := p.runtime.New()
	spec := p.spec
	spec.Binary, spec.StateDir = bin, stateDir
	if o.SessionDir != "" && o.Resume == "" {
		spec.SessionID = newUUID()
	}
	store, _ := adapter.(adapters.SessionStore)
	if o.Resume != "" {
		if store == nil {
			return end(events.StatusRejected, fmt.Sprintf("--resume: %s sessions cannot be resumed by agentrun", o.Runtime))
		}
		if err := store.RestoreSession(spec, sessionFile(o.SessionDir, o.Runtime, o.Resume)); err != nil {
			return end(events.StatusFailed, fmt.Sprintf("--resume %s: %v", o.Resume, err))
		}
	}
	launch, err := adapter.Launch(spec)
	if err != nil {
		return end(events.StatusRejected, err.Error())
	}

	var raw io.Writer
	if o.RawPath != "" {
		f, err := os.OpenFile(o.RawPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return end(events.StatusRejected, fmt.Sprintf("--raw %s: %v; pass a writable file path", o.RawPath, err))
		}
		defer f.Close()
		raw = f
	}

	stderrTail := newTail(stderr, 500)
	p.iso.prepareHost()
	home := filepath.Join(stateDir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return end(events.StatusFailed, fmt.Sprintf("cannot create the agent's home: %v", err))
	}
	pipe := newPipeline(adapter, agg)
	ps := processSpec{argv: launch.Argv, env: p.iso.env(home, launch.Env, p.env), dir: p.cwd,
		stdin: launch.Stdin, stderr: stderrTail}
	if p.iso.sandboxed() {
		ps.sandbox = &sandbox.Config{Workspace: p.cwd, Writable: []string{stateDir}, ReadOnly: visibleUnderTmp(bin),
			DenyRead: p.iso.denyRead, NoNetwork: p.iso.policy.Mode == proxy.ModeNone, Proc: p.iso.proc}
		ps.sandbox.Init, ps.sandbox.InitUsesVerb = sandbox.FindInit(selfExe())
		ps.policy, ps.resolver = p.iso.policy, p.iso.resolver
		ps.onAccess = func(a proxy.Access) {
			pipe.record(records.Network{Host: a.Host, Port: a.Port, Allowed: a.Allowed, Reason: a.Reason})
		}
	}
	// start comes once the process runs (a launch that fails gives only
	// end), after the [note] lines and before anything the proxy reports:
	// the aggregator stays locked until it is written.
	pipe.mu.Lock()
	proc, err := startProcess(ps)
	if err != nil {
		defer pipe.mu.Unlock()
		outcome := aggregator.Outcome{Status: events.StatusFailed, Detail: err.Error(), Started: started}
		var sbErr errSandboxStart
		if errors.As(err, &sbErr) {
			outcome.Detail = "the sandbox failed before the agent started: " + sbErr.Error()
		}
		return agg.Finish(outcome)
	}
	for _, n := range p.iso.notes(o.SessionDir, p.cwd) {
		_ = out.Note(n)
	}
	agg.Start(&events.Start{Runtime: o.Runtime, Sandbox: p.iso.mode, Network: p.iso.network(),
		DenyRead: p.iso.startDenyRead(), Model: events.StringOrNil(o.Model), Cwd: p.cwd,
		Argv: displayArgv(launch.Argv, o.Prompt), Env: p.envNames()})
	pipe.mu.Unlock()
	if !launch.EchoesPrompt {
		pipe.record(records.Prompt{Text: o.Prompt, Images: o.Images})
	}

	stop := &stopper{proc: proc, grace: o.Grace}
	if stop.grace <= 0 {
		stop.grace = DefaultGrace
	}
	if o.Timeout > 0 {
		t := time.AfterFunc(o.Timeout, func() {
			stop.stop(events.StatusTimeout, fmt.Sprintf("--timeout %d reached", int(o.Timeout/time.Second)))
		})
		defer t.Stop()
	}
	go func() {
		select {
		case <-ctx.Done():
			stop.stop(events.StatusInterrupted, "")
		case <-proc.exited:
		}
	}()

	onLine := func(pr progress) {
		if o.MaxTurns > 0 && pr.mainCalls > o.MaxTurns {
			stop.stop(events.StatusLimit, fmt.Sprintf("--max-turns %d reached: the main agent started model call %d", o.MaxTurns, pr.mainCalls))
		}
		if o.MaxTokens > 0 && pr.tokens > o.MaxTokens {
			stop.stop(events.StatusLimit, fmt.Sprintf("--max-tokens %d reached: %d tokens used", o.MaxTokens, pr.tokens))
		}
	}
	warn := func(msg string) { fmt.Fprintf(stderr, "[agentrun] %s\n", msg) }
	if err := pipe.consume(proc.stdout, raw, onLine, warn); err != nil {
		warn(fmt.Sprintf("reading %s output: %v", o.Runtime, err))
	}
	exit := proc.wait()
	pipe.close()

	outcome := aggregator.Outcome{Started: started, ExitCode: exit.code()}
	if cause, detail := stop.result(); cause != "" {
		outcome.Status, outcome.Detail = cause, detail
	} else {
		v := adapter.Verdict(adapters.Exit{Code: exit.Code, Signaled: exit.Signaled})
		outcome.Status = events.StatusFinished
		if v.Failed {
			outcome.Status, outcome.Detail = events.StatusFailed, failureDetail(v.Detail, stderrTail.String(), o.Runtime, exit)
		}
	}
	if o.SessionDir != "" && store != nil {
		if id := agg.SessionID(); id != "" {
			saved, err := store.SaveSession(spec, id, sessionFile(o.SessionDir, o.Runtime, id))
			if err != nil {
				warn(fmt.Sprintf("--session-dir: could not save session %s: %v", id, err))
			} else if saved {
				outcome.SessionID = id
			}
		}
	}
	pipe.mu.Lock()
	defer pipe.mu.Unlock()
	return agg.Finish(outcome)
}

// failureDetail follows seed 003: the runtime's message, else the last 500
// characters of stderr, else a fixed sentence.
func failureDetail(msg, stderrTail, runtime string, exit exitInfo) string {
	switch {
	case msg != "":
		return msg
	case stderrTail != "":
		return stderrTail
	case exit.Signaled:
		return fmt.Sprintf("%s was killed by signal %d (%s)", runtime, int(exit.Signal), exit.Signal)
	case exit.Code > 128 && exit.Code <= 128+64:
		// In the sandbox bwrap reports a CLI killed by signal N as 128+N,
		// as shells do.
		sig := syscall.Signal(exit.Code - 128)
		return fmt.Sprintf("%s exited with code %d: killed by signal %d (%s)", runtime, exit.Code, int(sig), sig)
	}
	return fmt.Sprintf("%s failed with exit code %d and no error message", runtime, exit.Code)
}

// resolveBinary finds the runtime's CLI: the path in its environment
// variable, else its name in PATH.
func resolveBinary(rt adapters.Runtime) (string, error) {
	if p := os.Getenv(rt.BinaryEnv); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s CLI not found: %s=%s is not an executable file", rt.Name, rt.BinaryEnv, p)
		}
		return p, nil
	}
	p, err := exec.LookPath(rt.Binary)
	if err != nil {
		return "", fmt.Errorf("%s CLI not found: no %q in PATH; install it (hack/install-clis.sh %s) or set %s to its path", rt.Name, rt.Binary, rt.Name, rt.BinaryEnv)
	}
	return p, nil
}

// selfExe is this binary; the sandbox's first process is found beside it.
func selfExe() string {
	p, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// visibleUnderTmp lists what of the CLI must be bound back into the
// sandbox because it lives under /tmp, which the sandbox replaces: the
// directory of the binary, and of its resolved target.
func visibleUnderTmp(bin string) []string {
	var out []string
	for _, p := range []string{bin, resolved(bin)} {
		if d := filepath.Dir(p); d == "/tmp" || strings.HasPrefix(d, "/tmp/") {
			out = append(out, d)
		}
	}
	return out
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func dedupEnv(env []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := cutEnv(kv)
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// displayArgv is argv without the prompt (start.argv never holds it).
func displayArgv(argv []string, prompt string) []string {
	out := make([]string, 0, len(argv))
	for _, a := range argv {
		if a != prompt {
			out = append(out, a)
		}
	}
	return out
}

func sessionFile(dir, runtime, id string) string {
	return filepath.Join(dir, runtime, filepath.Base(id)+".jsonl")
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// stopper ends a run early, once: the first cause wins.
type stopper struct {
	mu     sync.Mutex
	proc   *process
	grace  time.Duration
	cause  string
	detail string
}

func (s *stopper) stop(cause, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause != "" {
		return
	}
	s.cause, s.detail = cause, detail
	s.proc.interrupt(syscall.SIGINT)
	time.AfterFunc(s.grace, func() { s.proc.signal(syscall.SIGKILL) })
}

func (s *stopper) result() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause, s.detail
}
