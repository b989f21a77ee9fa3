// Package telemetry exports one run as an OpenTelemetry trace and metrics in
// the GenAI semantic conventions (docs/telemetry.md). It is a consumer of the
// schema-1 event stream, like the formats in events/format: every runtime
// gets the same spans, built in the runner's process from the events the
// aggregator wrote, so the agent can neither see, stop nor forge them.
//
// The export never gets in the run's way: spans are built on a goroutine of
// their own, handed to a bounded queue that drops when the collector is slow,
// exported without retries, and flushed at the end for at most FlushTimeout;
// a run makes at most MaxSpans spans, however many tool calls the agent
// makes (the rest are counted, and their usage still adds up).
package telemetry
