package format

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

type brokenWriter struct{ after int }

func (b *brokenWriter) Write(p []byte) (int, error) {
	if b.after <= 0 {
		return 0, errors.New("broken pipe")
	}
	b.after--
	return len(p), nil
}

// TestTeeGoesOnWithoutAFailedRenderer: stdout's reader dies (| tee and
// Ctrl-C), and the events file still gets every event, the end included.
func TestTeeGoesOnWithoutAFailedRenderer(t *testing.T) {
	var file bytes.Buffer
	tee := NewTee(NewJSONL(&brokenWriter{after: 1}), NewJSONL(&file))
	start := &events.Start{Runtime: "codex", Network: events.Network{Allow: []string{}}, DenyRead: []string{}, Argv: []string{}, Env: []string{}}
	for i, e := range []events.Event{start, &events.Prompt{Text: "p", Images: []string{}}, &events.End{Status: "finished"}} {
		events.Head(e).Type = []string{"start", "prompt", "end"}[i]
		if err := tee.Event(e); err != nil {
			t.Fatalf("event %d: %v (one renderer still works)", i, err)
		}
	}
	if tee.Failed(0) == nil || tee.Failed(1) != nil || !strings.Contains(tee.Err().Error(), "broken pipe") {
		t.Errorf("failed: %v, %v; err %v", tee.Failed(0), tee.Failed(1), tee.Err())
	}
	if n := strings.Count(file.String(), "\n"); n != 3 || !strings.Contains(file.String(), `"type":"end"`) {
		t.Errorf("the events file has %d lines:\n%s", n, file.String())
	}
	// When every renderer failed, the tee fails.
	all := NewTee(NewJSONL(&brokenWriter{}))
	if err := all.Event(start); err == nil {
		t.Error("a tee of failed renderers reports no error")
	}
}
