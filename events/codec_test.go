package events

import (
	"bytes"
	"testing"
	"time"
)

// countingWriter records every Write call.
type countingWriter struct{ writes [][]byte }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

// TestWriterIsMarshal: the Writer reuses its encoder and buffer across
// events; every line must still be Marshal's bytes plus LF, in one Write
// each (readers tail the stream line by line), also after a large event.
func TestWriterIsMarshal(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 4, 5, 6e6, time.UTC)
	text := func(s string) Event {
		e := &Text{Text: s}
		Stamp(e, TypeText, at)
		return e
	}
	usage := &Usage{Model: StringOrNil("m"), InputTokens: Int64(12), CostUSD: Float64(0.1 + 0.2)}
	Stamp(usage, TypeUsage, at)
	end := &End{Status: StatusFinished, Usage: NewTotals(), Result: StringOrNil("<b>&</b>")}
	Stamp(end, TypeEnd, at)
	evs := []Event{
		text("<html> & \u2028 \"quoted\" \x01 \xff\xfe tab\t"),
		text(string(bytes.Repeat([]byte("large "), 400000))),
		usage,
		text("short after large"),
		end,
	}
	var c countingWriter
	w := NewWriter(&c)
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.writes) != len(evs) {
		t.Fatalf("%d writes for %d events", len(c.writes), len(evs))
	}
	for i, e := range evs {
		want, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if want = append(want, '\n'); !bytes.Equal(c.writes[i], want) {
			t.Errorf("event %d:\n got %q\nwant %q", i, c.writes[i], want)
		}
	}
}
