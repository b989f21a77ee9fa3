package runner

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/format"
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
	warn := func(msg string) { fmt.Fprintf(stderr, "[agentrun] %s\n", msg) }
	readErr := pipe.consume(in, nil, nil, warn)
	pipe.close()
	v := adapter.Verdict(adapters.Exit{Code: o.ExitCode})
	outcome := aggregator.Outcome{Status: events.StatusFinished, ExitCode: &o.ExitCode, Started: started}
	if v.Failed {
		outcome.Status, outcome.Detail = events.StatusFailed, v.Detail
		if outcome.Detail == "" {
			outcome.Detail = fmt.Sprintf("%s failed with exit code %d and no error message", o.Runtime, o.ExitCode)
		}
	}
	if readErr != nil {
		outcome.Status, outcome.Detail = events.StatusFailed, fmt.Sprintf("reading the raw output: %v", readErr)
	}
	end := agg.Finish(outcome)
	return end, agg.Err()
}
