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

	"github.com/agentrun-dev/agentrun/internal/verb"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/patchlog"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
	"github.com/agentrun-dev/agentrun/sidecar/tail"
)

// meterPoll is how often the sidecar looks at the runner's meter file: a
// stat and a read of a few bytes.
const meterPoll = 250 * time.Millisecond

const tailSynopsis = "agentrun tail [--linger DURATION] [--poll DURATION] [--progress-addr ADDR [--meter-file FILE]] FILE\n       agentrun tail --patch PATCH [--linger DURATION] [--poll DURATION] FILE"

// tailCmd is the `events` sidecar of an agent Pod: it copies the event file
// to stdout as the runner writes it and exits after the end event, or on
// SIGTERM once it has copied what the file holds. With --progress-addr it
// also serves the run's live progress (package progress) read-only on that
// address while it follows.
func tailCmd(args []string, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("agentrun tail", flag.ContinueOnError)
	var f podcontract.TailFlags
	f.Register(fs)
	if code, done := verb.Parse(fs, args, tailSynopsis, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "agentrun tail: expected one events file, got %d arguments\nusage: %s\n", fs.NArg(), tailSynopsis)
		return 2
	}
	f.File = fs.Arg(0)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if f.PatchFile != "" {
		return patchCmd(ctx, f, stdout, stderr)
	}
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
	if _, err := tail.Follow(ctx, tail.Options{Path: f.File, Poll: f.Poll, Linger: f.Linger}, out); err != nil {
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

// patchCmd is the patch container of an agent Pod (spec.git push mode
// Patch): it follows the events file without copying it, and after the end
// event (the runner writes the patch before it) writes the patch to stdout
// for the manager, then lingers like the events sidecar. Without an end
// event (SIGTERM first: the runner was killed) it writes nothing, and the
// manager keeps no patch.
func patchCmd(ctx context.Context, f podcontract.TailFlags, stdout, stderr *os.File) int {
	res, err := tail.Follow(ctx, tail.Options{Path: f.File, Poll: f.Poll}, io.Discard)
	if err != nil {
		fmt.Fprintf(stderr, "agentrun tail: %v\n", err)
		return 1
	}
	if !res.SawEnd {
		fmt.Fprintln(stderr, "agentrun tail: stopped before the run's end event: no patch")
		return 0
	}
	if err := patchlog.Write(stdout, f.PatchFile); err != nil {
		fmt.Fprintf(stderr, "agentrun tail: the patch: %v\n", err)
		return 1
	}
	if f.Linger > 0 {
		t := time.NewTimer(f.Linger)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return 0
}
