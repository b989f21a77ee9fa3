package events

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Writer writes one event per line and flushes each line as it is written,
// so a reader of a pipe or a file sees every event at once.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf jsonBuffer
	// enc encodes into buf, reused for every event (Marshal's encoding:
	// HTML escaping off); Encode ends the line with its LF.
	enc *json.Encoder
}

// NewWriter returns a Writer on w. w should be unbuffered (a file or pipe):
// the Writer issues exactly one Write per event.
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{w: w}
	wr.enc = json.NewEncoder(&wr.buf)
	wr.enc.SetEscapeHTML(false)
	return wr
}

// Write encodes e as one JSON line.
func (w *Writer) Write(e Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.data = w.buf.data[:0]
	if err := w.enc.Encode(e); err != nil {
		return err
	}
	_, err := w.w.Write(w.buf.data)
	if cap(w.buf.data) > 1<<20 {
		w.buf.data = nil // one huge event does not keep its buffer
	}
	return err
}

// Marshal encodes e without a trailing newline. HTML escaping is off: the
// stream is read by programs and terminals, not browsers.
func Marshal(e Event) ([]byte, error) {
	var b jsonBuffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	out := b.data
	if n := len(out); n > 0 && out[n-1] == '\n' {
		out = out[:n-1]
	}
	return out, nil
}

type jsonBuffer struct{ data []byte }

func (b *jsonBuffer) Write(p []byte) (int, error) { b.data = append(b.data, p...); return len(p), nil }

// Decode parses one schema-1 line into its typed event. Unknown types give
// (nil, nil): readers skip them, as docs/events.md ("Versioning") asks.
func Decode(line []byte) (Event, error) {
	var head Base
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("not a JSON event: %w", err)
	}
	if head.Schema != Schema {
		return nil, fmt.Errorf("unsupported event schema %d (this agentrun reads schema %d)", head.Schema, Schema)
	}
	e := newEvent(head.Type)
	if e == nil {
		return nil, nil
	}
	if err := json.Unmarshal(line, e); err != nil {
		return nil, fmt.Errorf("bad %s event: %w", head.Type, err)
	}
	return e, nil
}

func newEvent(typ string) Event {
	switch typ {
	case TypeStart:
		return &Start{}
	case TypePrompt:
		return &Prompt{}
	case TypeToolStart:
		return &ToolStart{}
	case TypeTool:
		return &Tool{}
	case TypeText:
		return &Text{}
	case TypeUsage:
		return &Usage{}
	case TypeSubagentStart:
		return &SubagentStart{}
	case TypeSubagentEnd:
		return &SubagentEnd{}
	case TypeNetwork:
		return &NetworkAccess{}
	case TypeEnd:
		return &End{}
	}
	return nil
}

// Reader reads events line by line, skipping unknown types.
type Reader struct {
	r    *bufio.Reader
	line int
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next known event, or io.EOF. A malformed line is an
// error that names its line number; the caller decides whether to go on.
func (r *Reader) Next() (Event, error) {
	for {
		line, err := r.r.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return nil, err
		}
		r.line++
		if len(trimSpace(line)) == 0 {
			continue
		}
		e, derr := Decode(line)
		if derr != nil {
			return nil, fmt.Errorf("line %d: %w", r.line, derr)
		}
		if e != nil {
			return e, nil
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
