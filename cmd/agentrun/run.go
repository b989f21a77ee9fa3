package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/internal/verb"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/runner"
)

const runSynopsis = "agentrun run --runtime RUNTIME [flags] PROMPT|-"

// runHelpTail closes run's help: where the prompt comes from, and the
// file that keeps the stream whole.
const runHelpTail = `
The prompt is the last argument; "-" reads it from stdin, and --prompt-file FILE
from a file (no size limit of the argument list applies to either).
--events FILE keeps the jsonl stream, end event included, even when a pipe's
reader (| tee) dies with Ctrl-C. Exit codes: 0 finished, 1 failed, 2 rejected,
3 limit, 5 output lost (--raw or --events could not be written), 124 timeout,
130 interrupted.
A model on this machine: its base URL on the loopback with --env and exactly
its host:port with --allow-host, e.g. --env ANTHROPIC_BASE_URL=http://127.0.0.1:8099
--allow-host 127.0.0.1:8099 (docs/local.md, "A model on this machine").
`

func runCmd(args []string, stdin, stdout, stderr *os.File) int {
	started := time.Now()
	var o runner.Options
	fs := flag.NewFlagSet("agentrun run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.Register(fs)

	parseErr := fs.Parse(args)
	if errors.Is(parseErr, flag.ErrHelp) {
		verb.PrintUsage(fs, runSynopsis, stdout)
		fmt.Fprint(stdout, runHelpTail)
		return 0
	}
	out, ferr := newRenderer(o.Format, stdout, stderr)
	if ferr != nil {
		out, _ = newRenderer("jsonl", stdout, stderr)
	}
	// Where the runtime's stderr goes is the chosen format's business (rich
	// inserts it into its scroll area), decided before any --events tee.
	runtimeStderr := stderrFor(out, stderr)
	// A write to stdout after its reader died (| tee, gone with Ctrl-C)
	// fails with EPIPE instead of killing agentrun, so the --events file
	// still gets the end event. Notify, not Ignore: an ignored SIGPIPE
	// would be inherited by the agent's CLI and its tools.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	tee := format.NewTee(out)
	if o.EventsPath != "" {
		// Created before anything else, so that a follower finds it; not
		// through a link an earlier agent left in the workspace.
		f, err := runner.FilesFor(o.Cwd).Create(o.EventsPath, 0o644)
		if err != nil {
			ferr = errors.New(runner.CreateError("--events", o.EventsPath, err))
		} else {
			defer f.Close()
			tee = format.NewTee(out, format.NewJSONL(f))
		}
	}
	out = tee
	// The run's telemetry is a consumer of the stream like the formats;
	// it closes last, after the end is written, within its own deadline.
	if rec, err := startTelemetry(o.OTLPEndpoint, o.NewTraceID, stderr); err != nil && ferr == nil {
		ferr = err
	} else if rec != nil {
		out = format.NewTee(tee, rec)
		o.TraceID = rec.TraceID()
	}
	defer out.Close()
	reject := func(detail string) int {
		agg := aggregator.New(func(e events.Event) error { return out.Event(e) }, time.Now)
		end := agg.Finish(aggregator.Outcome{Status: events.StatusRejected, Detail: detail, Started: started})
		if o.SummaryPath != "" {
			// Every exit path leaves the summary a Pod's controller reads
			// (as far as the flags were parsed before the bad one).
			s := podcontract.FromEnd(end, agg.Counters())
			s.TraceID = o.TraceID
			_ = runner.WriteSummary(runner.FilesFor(o.Cwd), o.SummaryPath, s)
		}
		return exitCodes[events.StatusRejected]
	}
	switch {
	case parseErr != nil:
		return reject(fmt.Sprintf("%v; run agentrun run -h for the flags", flagError(parseErr)))
	case ferr != nil:
		return reject(ferr.Error())
	case fs.NArg() > 1:
		return reject(fmt.Sprintf("expected one prompt argument, got %d (%q ...): quote the prompt, and put every flag before it", fs.NArg(), fs.Arg(0)))
	}
	o.Prompt = fs.Arg(0)
	if o.Prompt == "-" {
		if o.PromptFile != "" {
			return reject(fmt.Sprintf("--prompt-file %s and - (stdin): give the prompt once", o.PromptFile))
		}
		if term.IsTerminal(int(stdin.Fd())) {
			fmt.Fprintln(stderr, "agentrun: reading the prompt from stdin; end it with Ctrl-D")
		}
		p, err := runner.ReadPrompt(stdin)
		if err != nil {
			return reject(fmt.Sprintf("reading the prompt from stdin (-): %v", err))
		}
		o.Prompt = p
		if strings.TrimSpace(p) == "" {
			return reject("the prompt from stdin (-) is empty: pipe the task in, for example: echo \"fix the failing test\" | agentrun run --runtime " + o.Runtime + " -")
		}
	}
	o.Started = started

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var lost []error
	o.OutputLost = func(err error) { lost = append(lost, err) }
	end := runner.Run(ctx, o, out, runtimeStderr)
	lost = append(lost, streamsLost(tee, o.EventsPath, stderr)...)
	return exitCode(end.Status, len(lost) > 0)
}

// exitOutputLost is agentrun run's exit code for a run that ended
// (finished or failed: the end event says which) while some of its output
// could not be written: --raw, --events, --summary or stdout.
const exitOutputLost = 5

// exitCode is the code for the end status, exitOutputLost instead of 0
// or 1 when output was lost: a script must not take an incomplete record
// for a complete one. A stop (limit, timeout, interrupt) keeps its code.
func exitCode(status string, lost bool) int {
	if lost && (status == events.StatusFinished || status == events.StatusFailed) {
		return exitOutputLost
	}
	return exitCodes[status]
}

// streamsLost reports the event streams that could not be written to the
// end, stdout (the tee's first renderer) and --events (its second), on
// stderr.
func streamsLost(tee *format.Tee, eventsPath string, stderr io.Writer) []error {
	var lost []error
	if err := tee.Failed(0); err != nil {
		where := "pass --events FILE to keep it whole"
		if eventsPath != "" && tee.Failed(1) == nil {
			where = "--events " + eventsPath + " holds it whole"
		}
		lost = append(lost, fmt.Errorf("stdout: %v: the event stream there is incomplete; %s", err, where))
	}
	if eventsPath != "" {
		if err := tee.Failed(1); err != nil {
			lost = append(lost, fmt.Errorf("--events %s: %v: the events file is incomplete", eventsPath, err))
		}
	}
	for _, err := range lost {
		fmt.Fprintf(stderr, "[agentrun] %v\n", err)
	}
	return lost
}

// flagError words the flag package's "invalid value V for flag -NAME: WHY"
// as "--NAME WHY (got V)": the flag as people type it, the rule first.
func flagError(err error) error {
	var value, name string
	msg := err.Error()
	if n, _ := fmt.Sscanf(msg, "invalid value %q for flag -%s", &value, &name); n == 2 {
		name = strings.TrimSuffix(name, ":")
		if _, why, ok := strings.Cut(msg, ": "); ok {
			return fmt.Errorf("--%s %s (got %q)", name, why, value)
		}
	}
	return err
}
