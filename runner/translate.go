package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/events/records"
)

// TranslateOptions is one `agentrun translate`.
type TranslateOptions struct {
	Runtime  string
	Model    string
	ExitCode int // the exit code the runtime had, for the verdict
	// TraceID is start.trace_id when the replay exports telemetry.
	TraceID string
}

// Translate replays saved raw output (a --raw file) into the same events a
// live run gives: start first, end last. The end status comes from the
// adapter's verdict on the saved output and ExitCode.
func Translate(o TranslateOptions, in io.Reader, out format.Renderer, stderr io.Writer) (*events.End, error) {
	started := time.Now()
	rt, err := adapters.Lookup(o.Runtime)
	if err != nil {
		return nil, fmt.Errorf("--runtime: %w", err)
	}
	agg := aggregator.New(func(e events.Event) error { return out.Event(e) }, time.Now)
	cwd, _ := os.Getwd()
	agg.Start(&events.Start{Runtime: o.Runtime, Sandbox: "none",
		Network: events.Network{Mode: "full", Allow: []string{}}, DenyRead: []string{},
		Model: events.StringOrNil(o.Model), Cwd: cwd, Argv: []string{}, Env: []string{}, TraceID: o.TraceID})
	adapter := rt.New()
	if r, ok := adapter.(adapters.Replayer); ok {
		r.Replay(adapters.LaunchSpec{Model: o.Model})
	}
	pipe := newPipeline(adapter, agg)
	translated, noOutput := 0, false
	pipe.add = func(r records.Record) { translated++; agg.Add(r) }
	lines := 0
	warn := func(msg string) { fmt.Fprintf(stderr, "[agentrun] %s\n", msg) }
	readErr := pipe.consume(in, nil, func(progress) { lines++ }, warn, true)
	pipe.close()
	v := adapter.Verdict(adapters.Exit{Code: o.ExitCode})
	outcome := aggregator.Outcome{Status: events.StatusFinished, ExitCode: &o.ExitCode, Started: started}
	switch {
	case translated == 0:
		// Nothing in the input is the runtime's: another runtime's
		// output, the event stream itself, or no output at all.
		outcome.Status = events.StatusFailed
		read := fmt.Sprintf("%d lines read", lines)
		if lines == 1 {
			read = "1 line read"
		}
		outcome.Detail = fmt.Sprintf("the input holds no %s output that agentrun knows (%s): pass the --raw file of a %s run, and --runtime of the CLI that wrote it", o.Runtime, read, o.Runtime)
		noOutput = true
	case v.Failed && v.Unfinished:
		outcome.Status = events.StatusFailed
		outcome.Detail = fmt.Sprintf("the saved %s output stops before the end of its turn: the run was stopped or crashed, or the file is cut short", o.Runtime)
	case v.Failed:
		outcome.Status, outcome.Detail = events.StatusFailed, v.Detail
		if outcome.Detail == "" {
			outcome.Detail = fmt.Sprintf("%s failed with exit code %d and no error message", o.Runtime, o.ExitCode)
		}
	}
	if readErr != nil {
		outcome.Status, outcome.Detail = events.StatusFailed, fmt.Sprintf("reading the raw output: %v", readErr)
	}
	end := agg.Finish(outcome)
	if err := agg.Err(); err != nil {
		return end, err
	}
	if noOutput {
		return end, noOutputError{outcome.Detail}
	}
	return end, nil
}

// ErrNoOutput is Translate's error for an input with none of the
// runtime's output in it; the stream is complete, and its end says so.
var ErrNoOutput = errors.New("no output of the runtime in the input")

type noOutputError struct{ detail string }

func (e noOutputError) Error() string        { return e.detail }
func (e noOutputError) Is(target error) bool { return target == ErrNoOutput }
