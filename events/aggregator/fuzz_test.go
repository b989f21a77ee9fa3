package aggregator

import (
	"bytes"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/events/records"
)

// recordsFrom decodes fuzz bytes into a record sequence over a tiny id
// alphabet, so that ids collide, parents nest and calls repeat often.
func recordsFrom(data []byte) []records.Record {
	ids := []string{"", "a", "b", "c"}
	id := func(i int) string {
		if i < len(data) {
			return ids[int(data[i])%len(ids)]
		}
		return ""
	}
	var out []records.Record
	for i := 0; i+2 < len(data); i += 3 {
		x, y := id(i+1), id(i+2)
		n := int64(data[i+1])
		switch data[i] % 12 {
		case 0:
			out = append(out, records.ToolStart{ID: x, Parent: y, Name: "Bash", Summary: "Bash: x"})
		case 1:
			out = append(out, records.ToolEnd{ID: x, Parent: y, Denied: data[i+2]%2 == 0, Error: events.Bool(data[i+1]%2 == 0)})
		case 2:
			out = append(out, records.SubagentStart{ID: x, Parent: y, Kind: "Explore"})
		case 3:
			out = append(out, records.SubagentEnd{ID: x, Failed: n%2 == 0})
		case 4:
			out = append(out, records.Text{Parent: y, Text: string(data[i:])})
		case 5:
			out = append(out, records.Usage{Parent: y, CallID: x, Model: x, Counts: events.TokenCounts{InputTokens: &n}})
		case 6:
			out = append(out, records.CallStart{Parent: y, CallID: x})
		case 7:
			out = append(out, records.CallUsage{Parent: y, CallID: x, Counts: events.TokenCounts{OutputTokens: &n}})
		case 8:
			out = append(out, records.Prompt{Text: x})
		case 9:
			// As the proxy reports them: a host name and a port 1-65535.
			out = append(out, records.Network{Host: "host" + x, Port: int(n) + 1, Allowed: n%2 == 0, Reason: events.ReasonNotAllowed})
		case 10:
			t := events.NewTotals()
			t.AddModel(x, events.TokenCounts{CostUSD: events.Float64(float64(n))})
			out = append(out, records.Total{Usage: t})
		case 11:
			out = append(out, records.Result{Text: y})
		}
	}
	return out
}

func FuzzAggregator(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 1, 0})
	f.Add([]byte{2, 1, 0, 0, 2, 1, 5, 1, 2, 3, 1, 0})
	f.Add([]byte{2, 1, 2, 2, 2, 1, 4, 0, 1, 5, 3, 2, 10, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf bytes.Buffer
		w := events.NewWriter(&buf)
		a := New(w.Write, time.Now)
		a.Start(&events.Start{Runtime: "claude-code", Sandbox: "none", Network: events.Network{Mode: "full", Allow: []string{}},
			DenyRead: []string{}, Cwd: "/", Argv: []string{}, Env: []string{}})
		for _, r := range recordsFrom(data) {
			a.Add(r)
		}
		a.Finish(Outcome{Status: events.StatusFinished})
		if errs := eventstest.Check(buf.Bytes()); len(errs) > 0 {
			t.Fatalf("contract broken: %v\n%s", errs, buf.Bytes())
		}
	})
}
