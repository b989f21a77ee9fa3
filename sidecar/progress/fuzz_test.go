package progress

import (
	"encoding/json"
	"testing"
)

// FuzzTracker: whatever a forged event stream holds, the sidecar never
// panics, its activity line stays within its bound, and its document
// encodes.
func FuzzTracker(f *testing.F) {
	for _, l := range stream {
		f.Add([]byte(l + "\n"))
	}
	f.Add([]byte(`{"schema":1,"type":"usage","time":"x","parent":"p","model":"m","input_tokens":-5,"output_tokens":null,"cache_read_tokens":1e3,"cache_write_tokens":0,"cost_usd":-1,"context_tokens":1}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := NewTracker()
		w := NewLineWriter(tr)
		w.Write(b)
		w.Write([]byte("\n"))
		d, _ := tr.Snapshot()
		if len(d.Activity) > MaxActivity {
			t.Fatalf("activity of %d bytes", len(d.Activity))
		}
		if _, err := json.Marshal(d); err != nil {
			t.Fatalf("the document does not encode: %v", err)
		}
	})
}

// FuzzValidate: the manager's check of a Pod's document never panics, and
// a document it accepts encodes again.
func FuzzValidate(f *testing.F) {
	tr := NewTracker()
	for _, l := range stream {
		tr.Line([]byte(l))
	}
	d, _ := tr.Snapshot()
	valid, _ := json.Marshal(d)
	f.Add(valid)
	f.Add([]byte(`{"v":1,"boot":"b","version":1,"usage":{"input_tokens":-1,"by_model":{"":{}}},"last_event":"yesterday"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Doc
		if json.Unmarshal(b, &d) != nil {
			return
		}
		if d.Validate() != nil {
			return
		}
		if _, err := json.Marshal(d); err != nil {
			t.Fatalf("an accepted document does not encode: %v", err)
		}
	})
}
