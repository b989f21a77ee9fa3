package codex

import (
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestRealCaptures replays the real codex 0.171.0 output of the mock
// scenarios (testdata/real, see its README) and checks the unified events:
// sequence, the contract, usage against what the mock served (one usage
// per turn, input without the cached tokens), result and verdict. The live
// versions of these runs are in test/cli.
func TestRealCaptures(t *testing.T) {
	tests := []struct {
		name   string
		types  string
		failed bool
		detail string // prefix
		result string
		check  func(t *testing.T, evs []events.Event)
	}{
		{name: "tool", types: "start tool_start tool text usage end", result: "Done: wrote hello.txt",
			check: func(t *testing.T, evs []events.Event) {
				tool := eventstest.Find[*events.Tool](evs)
				if tool.Name != "command_execution" || tool.Summary != "command_execution: echo hello > hello.txt" || tool.Error == nil || *tool.Error {
					t.Errorf("tool = %+v", tool)
				}
			}},
		{name: "parallel", types: "start text tool_start tool tool_start tool text usage end",
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done",
			check: func(t *testing.T, evs []events.Event) {
				var got []string
				for _, e := range evs {
					if tl, ok := e.(*events.Tool); ok {
						got = append(got, tl.Summary)
					}
				}
				// codex ran them in this order; `ls` needs no quotes.
				if strings.Join(got, "|") != "command_execution: echo two|command_execution: ls" {
					t.Errorf("tools %q", got)
				}
			}},
		{name: "error401", types: "start end", failed: true, detail: "unexpected status 401 Unauthorized: mockmodel: Incorrect API key provided."},
		{name: "error500", types: "start end", failed: true, detail: "We’re currently experiencing high demand"},
		// SIGINT: exit 1 and no closing event; nothing was finished.
		{name: "interrupt", types: "start end", failed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := adapterstest.ReadCapture(t, tt.name)
			a := New()
			a.Replay(adapters.LaunchSpec{Model: "gpt-5.5"})
			evs, v := adapterstest.Replay(t, a, Name, c.Raw, adapters.Exit{Code: c.Exit})
			if got := adapterstest.Types(evs); got != tt.types {
				t.Errorf("types:\n got %s\nwant %s", got, tt.types)
			}
			if v.Failed != tt.failed || !strings.HasPrefix(v.Detail, tt.detail) {
				t.Errorf("verdict %+v, want failed=%v detail %q...", v, tt.failed, tt.detail)
			}
			adapterstest.Check(t, evs)
			for _, err := range mockmodel.VerifyTurnUsage(evs, c.Ledger) {
				t.Error(err)
			}
			end := adapterstest.End(t, evs)
			if (tt.result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != tt.result) {
				t.Errorf("result %v, want %q", end.Result, tt.result)
			}
			for _, e := range evs {
				if u, ok := e.(*events.Usage); ok && (u.Model == nil || *u.Model != "gpt-5.5" || u.CostUSD != nil) {
					t.Errorf("usage model %v cost %v, want the --model value and no cost", u.Model, u.CostUSD)
				}
			}
			if tt.check != nil {
				tt.check(t, evs)
			}
		})
	}
}
