package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
	"github.com/agentrun-dev/agentrun/sidecar/tail"
)

// meterPoll is how often the sidecar looks at the runner's meter file: a
// stat and a read of a few bytes.
const meterPoll = 250 * time.Millisecond

const tailSynopsis = "agentrun tail [--linger DURATION] [--poll DURATION] [--progress-addr ADDR [--meter-file FILE]] FILE"

// tailCmd is the `events` sidecar of an agent Pod: it copies the event file
// to stdout as the runner writes it and exits after the end event, or on
// SIGTERM once it has copied what the file holds. With --progress-addr it
// also serves the run's live progress (package progress) read-only on that
// address while it follows.
func tailCmd(args []string, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("agentrun tail", flag.ContinueOnError)
	var f podcontract.TailFlags
	f.Register(fs)
	if code, done := parseVerb(fs, args, tailSynopsis, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "agentrun tail: expected one events file, got %d arguments\nusage: %s\n", fs.NArg(), tailSynopsis)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var out io.Writer = stdout
	if f.ProgressAddr != "" {
		t := progress.NewTracker()
		out = io.MultiWriter(stdout, progress.NewLineWriter(t))
		serveCtx, stopServing := context.WithCancel(context.Background())
		defer stopServing()
		served := make(chan error, 1)
		go func() { served <- progress.Serve(serveCtx, f.ProgressAddr, t) }()
		go func() {
			// A port that cannot be bound costs the live view, never the
			// event log: say so and go on following.
			if err := <-served; err != nil {
				fmt.Fprintf(stderr, "agentrun tail: progress server: %v\n", err)
			}
		}()
		if f.MeterFile != "" {
			go followMeter(serveCtx, f.MeterFile, t)
		}
	}
	if _, err := tail.Follow(ctx, tail.Options{Path: fs.Arg(0), Poll: f.Poll, Linger: f.Linger}, out); err != nil {
		fmt.Fprintf(stderr, "agentrun tail: %v\n", err)
		return 1
	}
	return 0
}

// followMeter copies the runner's meter file into the tracker whenever it
// changes.
func followMeter(ctx context.Context, path string, t *progress.Tracker) {
	tick := time.NewTicker(meterPoll)
	defer tick.Stop()
	for {
		if m, ok := progress.ReadMeterFile(path); ok {
			t.SetMeter(m)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
