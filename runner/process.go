package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/internal/phases"
	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/sandbox"
)

// process is the runtime CLI in a session of its own: a terminal's Ctrl-C
// reaches only agentrun, and no process of the run has a controlling
// terminal to inject input into. In the sandbox the CLI runs under
// bubblewrap and the sandbox's init; agentPid is then the init, learned
// from its credentials, which passes an interrupt on to the CLI (and not
// to bwrap).
type process struct {
	cmd      *exec.Cmd
	stdout   *os.File
	exited   chan struct{}
	mu       sync.Mutex
	done     bool
	state    *os.ProcessState
	agentPid int
	// sandbox is the prepared sandbox, whose init reports how the agent
	// ended (nil without a sandbox).
	sandbox *sandbox.Prepared
	// stderrDone closes when the runtime's stderr was copied to its end
	// (nil when stderr is a file the runtime writes itself).
	stderrDone chan struct{}
	cleanup    []func()
}

// exitInfo is the end of the process.
type exitInfo struct {
	adapters.Exit
	Signal syscall.Signal
}

// code is end.exit_code: null when the process was killed by a signal.
func (e exitInfo) code() *int {
	if e.Signaled {
		return nil
	}
	c := e.Code
	return &c
}

// drainAfterExit bounds how long output is read after the CLI exited while
// a process it left behind still holds stdout open.
const drainAfterExit = 2 * time.Second

// sandboxStartTimeout bounds the wait for the sandbox's helper to report.
const sandboxStartTimeout = 30 * time.Second

// processSpec is what to start.
type processSpec struct {
	argv   []string
	env    []string
	dir    string
	stdin  []byte
	stdout *os.File // nil: a pipe the runner reads (process.stdout)
	stdinR io.Reader
	stderr io.Writer
	// sandbox is set to run the command in bubblewrap; onAccess then
	// receives the proxy's decisions (nil with --network none).
	sandbox  *sandbox.Config
	policy   *proxy.Policy
	resolver proxy.Resolver
	onAccess func(proxy.Access)
	// intercept sees the requests to the credential destinations.
	intercept proxy.Interceptor
}

// mountRaceTries bounds the starts of a sandbox that fail because the
// host's mount table changed meanwhile (sandbox.MountTableChanged). Such a
// change lasts as long as a root run's workspace mount (milliseconds), so a
// second start all but always works; three failures in a row are a host
// that mounts in a loop, which the error then names.
const mountRaceTries = 3

// startProcess starts the command, in the sandbox when ps.sandbox is set.
// A sandbox whose fresh /proc cannot be mounted (a container's masked
// /proc) is started again with the outer /proc, and one whose start met a
// change of the host's mount table is started again as it was (at most
// mountRaceTries starts): neither ran anything. Any other failure of
// bubblewrap before the command ran is an errSandboxStart that says why and
// how to fix it.
func startProcess(ps processSpec) (*process, error) {
	if ps.sandbox == nil {
		return startOnce(ps, nil)
	}
	mountRaces := 0
	for {
		gate := &gatedWriter{w: ps.stderr}
		try := ps
		try.stderr = gate
		p, err := startOnce(try, gate)
		var sbErr errSandboxStart
		if !errors.As(err, &sbErr) {
			return p, err
		}
		msg := strings.TrimSpace(gate.held())
		if sandbox.ProcMountFailed(msg) && ps.sandbox.Proc == sandbox.FreshProc {
			cfg := *ps.sandbox
			cfg.Proc = sandbox.HostProc
			ps.sandbox = &cfg
			continue
		}
		if sandbox.MountTableChanged(msg) && mountRaces < mountRaceTries-1 {
			mountRaces++
			continue
		}
		return p, errSandboxStart{errors.New(sandbox.Advice(msg))}
	}
}

// startOnce starts the command once. gate holds bubblewrap's stderr until
// the sandbox reported ready, so that a failure can be read (and retried)
// before anything reaches the user.
func startOnce(ps processSpec, gate *gatedWriter) (*process, error) {
	p := &process{exited: make(chan struct{})}
	argv, env := ps.argv, ps.env
	var prepared *sandbox.Prepared
	if ps.sandbox != nil {
		var err error
		phases.Mark("prepare")
		if prepared, err = sandbox.Prepare(*ps.sandbox, env, argv); err != nil {
			return nil, err
		}
		argv, env = prepared.Argv, prepared.Env
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = ps.dir, env
	if prepared != nil {
		cmd.Dir = prepared.Dir
		p.sandbox = prepared
		p.cleanup = append(p.cleanup, prepared.Close)
	}
	switch {
	case ps.stdinR != nil:
		cmd.Stdin = ps.stdinR
	default:
		cmd.Stdin = bytes.NewReader(ps.stdin)
	}
	// stdout and stderr are pipes the runner reads itself (unless they
	// are files), so that cmd.Wait returns when the process ends, not when
	// a child it left behind closes them.
	var closeAfterStart []*os.File
	if ps.stdout != nil {
		cmd.Stdout = ps.stdout
	} else {
		r, pw, err := os.Pipe()
		if err != nil {
			p.close()
			return nil, err
		}
		p.stdout, cmd.Stdout = r, pw
		closeAfterStart = append(closeAfterStart, pw)
	}
	var stderrR *os.File
	if f, ok := ps.stderr.(*os.File); ok {
		cmd.Stderr = f
	} else {
		r, pw, err := os.Pipe()
		if err != nil {
			p.close()
			return nil, err
		}
		stderrR, cmd.Stderr = r, pw
		closeAfterStart = append(closeAfterStart, pw)
	}
	if prepared != nil {
		cmd.ExtraFiles = prepared.ExtraFiles
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = drainAfterExit
	phases.Mark("bwrap-exec")
	err := cmd.Start()
	for _, f := range closeAfterStart {
		f.Close()
	}
	if prepared != nil {
		prepared.Started()
	}
	if err != nil {
		for _, f := range []*os.File{p.stdout, stderrR} {
			if f != nil {
				f.Close()
			}
		}
		p.close()
		return nil, fmt.Errorf("cannot start %s: %w", ps.argv[0], err)
	}
	if stderrR != nil {
		p.stderrDone = make(chan struct{})
		go func() {
			defer close(p.stderrDone)
			defer stderrR.Close()
			_, _ = io.Copy(ps.stderr, stderrR)
		}()
	}
	p.cmd = cmd
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		p.done, p.state = true, cmd.ProcessState
		p.mu.Unlock()
		close(p.exited)
		// A child the CLI left running may keep the pipes open: stop
		// waiting for its output after a moment so the run can end.
		for _, f := range []*os.File{p.stdout, stderrR} {
			if f != nil {
				time.AfterFunc(drainAfterExit, func() { _ = f.SetReadDeadline(time.Now()) })
			}
		}
	}()
	if prepared == nil {
		return p, nil
	}
	phases.Mark("bwrap-setup-and-init")
	ready, err := prepared.Receive(sandboxStartTimeout)
	if err != nil {
		p.kill()
		<-p.exited
		p.stderrCopied() // bwrap's message, read before it is judged
		if p.stdout != nil {
			p.stdout.Close()
		}
		p.close()
		return nil, errSandboxStart{err}
	}
	phases.Mark("proxy")
	gate.open()
	p.mu.Lock()
	p.agentPid = ready.Pid
	p.mu.Unlock()
	if len(ready.Listeners) > 0 {
		srv := &proxy.Server{Policy: ps.policy, Resolver: ps.resolver, OnAccess: ps.onAccess}
		if ps.intercept != nil {
			srv.Intercept = ps.intercept
		}
		for _, l := range ready.Listeners {
			go func() { _ = srv.Serve(l) }()
		}
		p.cleanup = append(p.cleanup, func() { srv.Close() })
	}
	return p, nil
}

// gatedWriter holds what is written until open, then passes it on.
type gatedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	buf    bytes.Buffer
	opened bool
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened {
		return g.w.Write(p)
	}
	if g.buf.Len() < 64<<10 {
		g.buf.Write(p)
	}
	return len(p), nil
}

func (g *gatedWriter) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opened = true
	if g.buf.Len() > 0 {
		_, _ = g.w.Write(g.buf.Bytes())
		g.buf.Reset()
	}
}

func (g *gatedWriter) held() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// errSandboxStart is a sandbox that failed before the agent ran; the
// process has exited and its stderr says why.
type errSandboxStart struct{ err error }

func (e errSandboxStart) Error() string { return e.err.Error() }

// close releases the proxy and the sandbox's placeholders.
func (p *process) close() {
	for _, f := range p.cleanup {
		f()
	}
	p.cleanup = nil
}

// interrupt asks the CLI to stop: the CLI itself in the sandbox, else its
// process group.
func (p *process) interrupt(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	if p.agentPid > 0 {
		_ = syscall.Kill(p.agentPid, sig)
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill sends SIGKILL to the whole process group: the CLI, bwrap and
// anything they started, including what an exited CLI left behind.
func (p *process) kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// wait returns the exit once the process ended (stdout was read to EOF).
// In the sandbox it is what the init saw of the CLI, so that a CLI killed
// by a signal reads the same as without a sandbox (bubblewrap's own exit
// code would be 128+N); bubblewrap's exit stands in only when the init
// could not report.
func (p *process) wait() exitInfo {
	<-p.exited
	phases.Mark("exit-report")
	if p.stdout != nil {
		p.stdout.Close()
	}
	p.kill() // do not leave anything of the run behind
	p.stderrCopied()
	var info exitInfo
	reported := false
	if p.sandbox != nil {
		if st, ok := p.sandbox.Status(); ok {
			info.Code, info.Signaled, info.Signal, reported = st.Code, st.Signaled, st.Signal, true
		}
	}
	p.close()
	if reported {
		return info
	}
	st := p.state
	if st == nil {
		info.Code = -1
		return info
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		info.Signaled, info.Signal = true, ws.Signal()
		return info
	}
	info.Code = st.ExitCode()
	if p.sandbox != nil && info.Code > 128 && info.Code <= 128+64 {
		// The init could not report (it was killed itself): bubblewrap's
		// 128+N says a signal ended the sandbox, and the CLI with it.
		info.Signaled, info.Signal = true, syscall.Signal(info.Code-128)
	}
	return info
}

// stderrCopied waits until the runtime's stderr has reached its end (the
// drain after exit bounds it).
func (p *process) stderrCopied() {
	if p.stderrDone != nil {
		<-p.stderrDone
	}
}

// exitedAlready reports whether the process has ended.
func (p *process) exitedAlready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// isDeadline reports the read deadline set after exit.
func isDeadline(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// tail passes writes through and keeps the last n characters.
type tail struct {
	mu  sync.Mutex
	w   io.Writer
	n   int
	buf []byte
}

func newTail(w io.Writer, n int) *tail { return &tail{w: w, n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if max := t.n * utf8.UTFMax; len(t.buf) > 2*max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-max:]...)
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// String is the last n characters written, as written (invalid UTF-8
// becomes U+FFFD), or "" when they are only white space.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(bytes.TrimSpace(t.buf)) == 0 {
		return ""
	}
	s := string(bytes.ToValidUTF8(t.buf, []byte("\uFFFD")))
	if r := []rune(s); len(r) > t.n {
		s = string(r[len(r)-t.n:])
	}
	return s
}
