package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/agentrun-dev/agentrun/telemetry"
)

// startTelemetry sets up the export of a run (or a replay) as a trace and
// metrics (docs/telemetry.md) from the standard OTEL_* variables,
// TRACEPARENT and TRACESTATE, --otlp-endpoint and --trace-id; nil when no
// endpoint is set. An error is a bad flag; problems with the variables are
// warnings, and the run goes on without them.
func startTelemetry(endpoint, traceID string, stderr io.Writer) (*telemetry.Recorder, error) {
	var mu sync.Mutex
	warn := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "[agentrun] %s\n", msg)
	}
	cfg, warns, err := telemetry.FromEnv(os.Getenv, endpoint)
	if err != nil {
		return nil, err
	}
	if traceID != "" && !telemetry.ValidTraceID(traceID) {
		return nil, fmt.Errorf("--trace-id %q: pass 32 lower-case hex digits, not all zero", traceID)
	}
	for _, w := range warns {
		warn(w)
	}
	if !cfg.Enabled {
		return nil, nil
	}
	cfg.TraceID = traceID
	rec, err := telemetry.Start(cfg, warn)
	if err != nil {
		// The exporter could not be built from the variables: the run
		// goes on without telemetry.
		warn(fmt.Sprintf("%v; the run is not exported", err))
		return nil, nil
	}
	return rec, nil
}
