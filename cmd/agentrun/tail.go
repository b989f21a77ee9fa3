package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentrun-dev/agentrun/tail"
)

// tailCmd is the `events` sidecar of an agent Pod: it copies the event file
// to stdout as the runner writes it and exits after the end event, or on
// SIGTERM once it has copied what the file holds.
func tailCmd(args []string, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("agentrun tail", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	linger := fs.Duration("linger", 0, "after the end event, wait up to this long for SIGTERM before exiting (a Kubernetes sidecar that exits early is restarted)")
	poll := fs.Duration("poll", tail.DefaultPoll, "how often to look for new events")
	help := fs.Bool("h", false, "show this help")
	err := fs.Parse(args)
	if *help {
		fs.SetOutput(stdout)
		fmt.Fprintln(stdout, "Usage: agentrun tail [--linger DURATION] FILE")
		fs.PrintDefaults()
		return 0
	}
	if err == nil && fs.NArg() != 1 {
		err = fmt.Errorf("expected one events file, got %d arguments", fs.NArg())
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentrun tail: %v; usage: agentrun tail [--linger DURATION] FILE\n", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if _, err := tail.Follow(ctx, tail.Options{Path: fs.Arg(0), Poll: *poll, Linger: *linger}, stdout); err != nil {
		fmt.Fprintf(stderr, "agentrun tail: %v\n", err)
		return 1
	}
	return 0
}
