package progress

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/records"
)

// TestLiveCountsAreTheEndCounts: the live tracker, reading the stream the
// aggregator writes, has the aggregator's counters and token totals after
// every event, beyond the proxy's cap of decisions reported one by one
// (a summary's suppressed count is that many refused connections) and
// with more models than a document carries.
func TestLiveCountsAreTheEndCounts(t *testing.T) {
	tr := NewTracker()
	var agg *aggregator.Aggregator
	var line bytes.Buffer
	clock := time.Date(2026, 10, 4, 13, 0, 0, 0, time.UTC)
	agg = aggregator.New(func(e events.Event) error {
		line.Reset()
		w := events.NewWriter(&line)
		if err := w.Write(e); err != nil {
			return err
		}
		tr.Line(bytes.TrimSpace(line.Bytes()))
		d, _ := tr.Snapshot()
		if got, want := d.Counters, agg.Counters(); got != want {
			t.Errorf("after %s: live counters %+v, the aggregator's %+v", events.Head(e).Type, got, want)
		}
		return nil
	}, func() time.Time { clock = clock.Add(time.Millisecond); return clock })
	agg.Start(&events.Start{Runtime: "claude-code", Sandbox: "bubblewrap", Network: events.Network{Mode: "full", Allow: []string{}},
		DenyRead: []string{}, Cwd: "/workspace", Argv: []string{"claude"}, Env: []string{}})
	agg.Add(records.Prompt{Text: "go"})
	for i := range MaxModels + 6 {
		agg.Add(records.Usage{Model: fmt.Sprintf("model-%02d", i), Counts: events.TokenCounts{InputTokens: events.Int64(int64(100 + i)), OutputTokens: events.Int64(1)}})
	}
	agg.Add(records.ToolStart{ID: "t1", Name: "Bash", Summary: "Bash: ls"})
	agg.Add(records.ToolEnd{ID: "t1", Error: events.Bool(true)})
	agg.Add(records.ToolEnd{ID: "t2", Denied: true, Name: "Read", Summary: "Read: /etc/shadow"})
	agg.Add(records.SubagentStart{ID: "s1", Kind: "Explore", Description: "look"})
	agg.Add(records.SubagentEnd{ID: "s1"})
	// Decisions one by one, then the proxy's summaries of those it no
	// longer reports one by one.
	agg.Add(records.Network{Host: "evil.example", Port: 443, Reason: events.ReasonNotAllowed})
	agg.Add(records.Network{Host: "api.example", Port: 443, Allowed: true})
	agg.Add(records.Network{Host: "evil.example", Port: 443, Reason: events.ReasonNotAllowed, Suppressed: 250})
	agg.Add(records.Network{Host: "10.0.0.1", Port: 80, Reason: events.ReasonPrivateAddress, Suppressed: 1})
	end := agg.Finish(aggregator.Outcome{Status: events.StatusFinished, ExitCode: events.Int(0)})

	c := agg.Counters()
	if want := (events.Counters{Tools: 2, ToolErrors: 1, Denials: 1, Subagents: 1, DeniedConnections: 1 + 250 + 1}); c != want {
		t.Errorf("counters %+v, want %+v", c, want)
	}
	d, _ := tr.Snapshot()
	if d.Counters != c {
		t.Errorf("live %+v, end %+v", d.Counters, c)
	}
	// The totals are the end's; the split carries the largest models.
	if *d.Usage.Total() != *end.Usage.Total() || d.Usage.Tokens() != end.Usage.Tokens() {
		t.Errorf("live tokens %d, end %d", d.Usage.Tokens(), end.Usage.Tokens())
	}
	if len(d.Usage.ByModel) != MaxModels || !d.ByModelCut {
		t.Errorf("the document carries %d models (cut %v), want the largest %d", len(d.Usage.ByModel), d.ByModelCut, MaxModels)
	}
	for i := range 6 {
		if _, kept := d.Usage.ByModel[fmt.Sprintf("model-%02d", i)]; kept {
			t.Errorf("model-%02d, one of the smallest, is in the document", i)
		}
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the bounded document does not validate: %v", err)
	}
}
