// Package format renders the schema-1 event stream for its readers: jsonl
// for programs, text and rich (format/text, format/rich) for people. Every
// format reads only events, never raw runtime output.
package format

import (
	"io"

	"github.com/agentrun-dev/agentrun/events"
)

// Renderer consumes the event stream of one run.
type Renderer interface {
	// Note is a [note] line for people, written where the start event is;
	// jsonl has no event for it and drops it.
	Note(text string) error
	// Event renders one event.
	Event(e events.Event) error
	// Close flushes what is left (rich restores the terminal).
	Close() error
}

// Live is a renderer that shows what an agent is writing before its text
// event (rich's live view). The runner hands it events.Partial; nothing
// else gets them, and no stream holds them.
type Live interface {
	Partial(p events.Partial) error
}

// JSONL writes each event as one JSON line, flushed as written.
type JSONL struct{ w *events.Writer }

// NewJSONL returns the jsonl renderer on w.
func NewJSONL(w io.Writer) *JSONL { return &JSONL{w: events.NewWriter(w)} }

// Note is dropped: jsonl carries only events.
func (j *JSONL) Note(string) error { return nil }

// Event writes e.
func (j *JSONL) Event(e events.Event) error { return j.w.Write(e) }

// Close does nothing; every line is already written.
func (j *JSONL) Close() error { return nil }
