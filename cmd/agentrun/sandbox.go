package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentrun-dev/agentrun/runner"
	"github.com/agentrun-dev/agentrun/sandbox"
)

// sandboxFlags registers the isolation flags `run` and `sandbox` share.
func sandboxFlags(fs *flag.FlagSet, o *runner.SandboxOptions) {
	fs.StringVar(&o.Sandbox, "sandbox", "", "bubblewrap (the default on Linux) or none")
	fs.StringVar(&o.Network, "network", "", "none or full (default full); --allow-host makes it custom")
	fs.Var((*multi)(&o.AllowHosts), "allow-host", "allow only these hosts: HOST[:PORT], *.suffix[:PORT], IP:PORT or CIDR:PORT (repeatable)")
	fs.Var((*multi)(&o.DenyRead), "deny-read", "hide this path from the agent, after the default list (repeatable)")
	fs.Var((*multi)(&o.AddHosts), "add-host", "resolve NAME to IP in the proxy, NAME=IP (repeatable)")
	fs.BoolVar(&o.WritableGit, "writable-git", false, "let the agent write the workspace's repositories (.git: commit); they are read-only by default")
	fs.IntVar(&o.MaxProcs, "max-procs", 0, fmt.Sprintf("the agent's process limit, threads included (default %d)", runner.DefaultMaxProcs))
}

func sandboxCmd(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	var c runner.SandboxCommand
	var eventsPath string
	fs := flag.NewFlagSet("agentrun sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sandboxFlags(fs, &c.SandboxOptions)
	fs.Var((*multi)(&c.Env), "env", "set a variable for the command, NAME=VALUE (repeatable)")
	fs.StringVar(&c.EnvFile, "env-file", "", "read NAME=VALUE lines for the command from this file")
	fs.Var((*multi)(&c.PassEnv), "pass-env", "pass this variable of agentrun's environment, NAME or PREFIX* (repeatable)")
	fs.StringVar(&c.Cwd, "cwd", "", "the workspace, the one writable directory (default: the current one)")
	fs.StringVar(&eventsPath, "events", "", "write the schema-1 network events here (default: stderr)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: agentrun sandbox [flags] -- COMMAND [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
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
	return runner.RunSandbox(ctx, c, stdin, stdout, stderr, netEvents)
}

// sandboxInitCmd is the first process inside the sandbox (not for people).
func sandboxInitCmd(args []string, stderr io.Writer) int { return sandbox.InitMain(args, stderr) }
