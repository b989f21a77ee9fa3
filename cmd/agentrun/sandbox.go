package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentrun-dev/agentrun/internal/phases"
	"github.com/agentrun-dev/agentrun/internal/verb"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/runner"
	"github.com/agentrun-dev/agentrun/sandbox"
)

func sandboxCmd(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	phases.Mark("flags")
	var c runner.SandboxCommand
	var eventsPath string
	fs := flag.NewFlagSet("agentrun sandbox", flag.ContinueOnError)
	c.SandboxFlags.Register(fs)
	fs.Var((*podcontract.List)(&c.Env), "env", "set a variable for the command, NAME=VALUE (repeatable)")
	fs.StringVar(&c.EnvFile, "env-file", "", "read NAME=VALUE lines for the command from this file")
	fs.Var((*podcontract.List)(&c.PassEnv), "pass-env", "pass this variable of agentrun's environment, NAME or PREFIX* (repeatable)")
	fs.StringVar(&c.Cwd, "cwd", "", "the workspace, the one writable directory (default: the current one)")
	fs.StringVar(&eventsPath, "events", "", "write the schema-1 network events here (default: stderr)")
	if code, done := verb.Parse(fs, args, "agentrun sandbox [flags] -- COMMAND [ARGS...]", stdout, stderr); done {
		return code
	}
	c.Argv = fs.Args()
	var netEvents io.Writer = stderr
	if eventsPath != "" {
		f, err := runner.FilesFor(c.Cwd).Create(eventsPath, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "agentrun sandbox: --events: %v\n", err)
			return runner.ExitSandboxFailed
		}
		defer f.Close()
		netEvents = f
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	code := runner.RunSandbox(ctx, c, stdin, stdout, stderr, netEvents)
	if p := phases.Path(); p != "" {
		// Opened as --events is (the agent may have planted a link in the
		// workspace), and through no link in a directory another user can
		// change either: a benchmark's file often lies in /tmp or /var/tmp,
		// where anyone may plant a link to a file of the caller's, or a
		// FIFO that would hold this open forever.
		files := runner.FilesFor(c.Cwd)
		files.OthersUntrusted = true
		if f, err := files.Append(p, 0o644); err != nil {
			fmt.Fprintf(stderr, "agentrun sandbox: %s: %v\n", phases.EnvVar, err)
		} else {
			_ = phases.WriteTo(f)
			f.Close()
		}
	}
	return code
}

// sandboxInitCmd is the first process inside the sandbox (not for people).
func sandboxInitCmd(args []string, stderr io.Writer) int { return sandbox.InitMain(args, stderr) }
