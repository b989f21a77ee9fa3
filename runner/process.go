package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentrun-dev/agentrun/adapters"
)

// process is the runtime CLI, in its own process group so that signals reach
// every process it started and a terminal's Ctrl-C reaches only agentrun.
type process struct {
	cmd    *exec.Cmd
	stdout *os.File
	exited chan struct{}
	once   sync.Once
	mu     sync.Mutex
	done   bool
	state  *os.ProcessState
	err    error
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

func startProcess(l *adapters.Launch, dir string, env []string, stderr io.Writer) (*process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(l.Argv[0], l.Argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = w, stderr
	cmd.Stdin = bytes.NewReader(l.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = drainAfterExit
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("cannot start %s: %w", l.Argv[0], err)
	}
	w.Close()
	p := &process{cmd: cmd, stdout: r, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.done, p.state, p.err = true, cmd.ProcessState, err
		p.mu.Unlock()
		close(p.exited)
		// A child the CLI left running may keep the pipe open: stop waiting
		// for its output after a moment so the run can end.
		time.AfterFunc(drainAfterExit, func() { _ = r.SetReadDeadline(time.Now()) })
	}()
	return p, nil
}

// signal sends sig to the whole process group while the CLI runs.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		if sig == syscall.SIGKILL {
			// Leftover children of an exited CLI.
			_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		}
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// wait returns the exit once the process ended (stdout was read to EOF).
func (p *process) wait() exitInfo {
	<-p.exited
	p.stdout.Close()
	// Do not leave anything of the run behind.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	var info exitInfo
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
	return info
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

// String is the last n characters written, trimmed of surrounding space.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.ToValidUTF8(bytes.TrimSpace(t.buf), []byte("\uFFFD")))
	if r := []rune(s); len(r) > t.n {
		s = string(r[len(r)-t.n:])
	}
	return s
}
