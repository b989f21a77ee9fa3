package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/phases"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/proxy"
)

// SandboxCommand is one `agentrun sandbox`: any command in exactly the
// sandbox and proxy an agent gets, for debugging a policy.
type SandboxCommand struct {
	podcontract.SandboxFlags
	Env     []string
	EnvFile string
	PassEnv []string
	Cwd     string
	Argv    []string
}

// ExitSandboxFailed is the exit code when the sandbox itself could not run
// the command (as env and docker use 125/126/127 for their own failures).
const ExitSandboxFailed = 125

// RunSandbox runs c with the caller's stdin, stdout and stderr, writes the
// proxy's decisions as schema-1 network events to netEvents, and returns
// the command's exit code. ctx cancelled (SIGINT, SIGTERM) interrupts the
// command; it gets DefaultGrace before it is killed.
func RunSandbox(ctx context.Context, c SandboxCommand, stdin io.Reader, stdout, stderr *os.File, netEvents io.Writer) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "agentrun sandbox: "+format+"\n", args...)
		return ExitSandboxFailed
	}
	if len(c.Argv) == 0 {
		return fail("no command: agentrun sandbox [flags] -- COMMAND [ARGS...]")
	}
	// No collection until the command runs: the start allocates a few MiB
	// that are garbage by then, and the one collection it would trigger
	// (agentrun's package initialisation leaves the heap near the first
	// goal) costs more on this path than the memory is worth.
	restoreGC := pauseGC()
	defer restoreGC()
	phases.Mark("workspace")
	p, err := prepareWorkspace(c.Cwd, c.EnvFile, c.Env, c.PassEnv, c.SandboxFlags)
	if err != nil {
		return fail("%v", err)
	}
	defer p.close()
	p.iso.prepareHost()
	for _, n := range p.iso.git.Notes {
		fmt.Fprintf(stderr, "agentrun sandbox: note: %s\n", n)
	}
	phases.Mark("git-placeholders")
	undo, err := p.iso.prepareWorkspace(p.ws, func(msg string) { fmt.Fprintf(stderr, "agentrun sandbox: warning: %s\n", msg) })
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		phases.Mark("post-run-check")
		undo()
	}()
	phases.Mark("state-dir")
	stateDir, err := os.MkdirTemp("", "agentrun-sandbox-")
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		phases.Mark("cleanup")
		os.RemoveAll(stateDir)
	}()
	home := filepath.Join(stateDir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return fail("%v", err)
	}
	w := events.NewWriter(netEvents)
	ps := processSpec{argv: c.Argv, env: p.iso.env(home, nil, p.env), dir: p.cwd, stdinR: stdin, stdout: stdout, stderr: stderr}
	if p.iso.sandboxed() {
		ps.sandbox = p.iso.sandboxConfig(p.ws, stateDir, lookPathOr(c.Argv[0]))
		ps.policy, ps.resolver = p.iso.policy, p.iso.resolver
		ps.onAccess = func(a proxy.Access) {
			var reason *string
			if !a.Allowed {
				reason = events.String(a.Reason)
			}
			e := &events.NetworkAccess{Host: a.Host, Port: a.Port, Allowed: a.Allowed, Reason: reason, Suppressed: a.Suppressed}
			events.Stamp(e, events.TypeNetwork, time.Now())
			_ = w.Write(e)
		}
	}
	proc, err := startProcess(ps)
	restoreGC()
	if err != nil {
		if proc != nil {
			proc.wait()
		}
		return fail("%v", err)
	}
	go func() {
		select {
		case <-ctx.Done():
			proc.interrupt(syscall.SIGINT)
			time.AfterFunc(DefaultGrace, func() { proc.kill() })
		case <-proc.exited:
		}
	}()
	phases.Mark("agent")
	exit := proc.wait()
	if exit.Signaled {
		return 128 + int(exit.Signal)
	}
	return exit.Code
}

// pauseGC turns the garbage collector off and returns what turns it back
// on as it was (GOGC), once.
func pauseGC() func() {
	old := debug.SetGCPercent(-1)
	var once sync.Once
	return func() { once.Do(func() { debug.SetGCPercent(old) }) }
}

func lookPathOr(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return name
}
