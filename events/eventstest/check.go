// Package eventstest checks the streams agentrun's own producers write
// against the contract of docs/events.md. Tests of every producer
// (aggregator, adapters, the real CLIs through agentrun, fuzzing) use it;
// the rules themselves are package contract's, which `agentrun validate`
// uses too.
package eventstest

import (
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/contract"
)

// Check validates a whole stream (one event per line) that agentrun wrote:
// every event against the JSON Schema, exactly the documented event types
// and fields in their order, and the rules between events. It returns every
// violation found; nil means the stream keeps the contract.
func Check(stream []byte) []error {
	var errs []error
	for _, p := range contract.Check(stream, contract.Options{Exact: true}) {
		errs = append(errs, p)
	}
	return errs
}

// Find returns the first event of type T in evs, or the zero T.
func Find[T events.Event](evs []events.Event) T {
	for _, e := range evs {
		if x, ok := e.(T); ok {
			return x
		}
	}
	var zero T
	return zero
}
