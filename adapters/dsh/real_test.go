package dsh

import (
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestRealCaptures replays the real dsh 0.1.0-rc.8 output of the mock
// scenarios (testdata/real, see its README) and checks the unified events:
// sequence, the contract, usage against what the mock served (one usage
// per step), result and verdict. The live versions of these runs are in
// test/cli.
func TestRealCaptures(t *testing.T) {
	tests := []struct {
		name   string
		types  string
		failed bool
		detail string
		result string
		check  func(t *testing.T, evs []events.Event)
	}{
		{name: "tool", types: "start prompt usage tool_start tool text usage end", result: "Done: wrote hello.txt",
			check: func(t *testing.T, evs []events.Event) {
				for _, e := range evs {
					if tl, ok := e.(*events.Tool); ok && (tl.Name != "bash" || tl.Summary != "bash: echo hello > hello.txt" || tl.Denied || tl.Error == nil || *tl.Error) {
						t.Errorf("tool = %+v", tl)
					}
				}
			}},
		// dsh runs the two calls of one reply one after the other.
		{name: "parallel", types: "start prompt text usage tool_start tool tool_start tool text usage end",
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		// The proxy refuses the host, curl exits 22: dsh's isError is false,
		// its "[exit code: 22]" marker makes the call an error.
		{name: "nethost", types: "start prompt usage tool_start tool text usage end", result: "The host was blocked.",
			check: func(t *testing.T, evs []events.Event) {
				if tl := eventstest.Find[*events.Tool](evs); tl == nil || tl.Error == nil || !*tl.Error || tl.Denied {
					t.Errorf("tool = %+v", tl)
				}
			}},
		// The headless runner exits 1; the turn's end has dsh's error.
		{name: "error401", types: "start prompt end", failed: true, detail: "AUTH: mockmodel: Incorrect API key provided."},
		{name: "error500", types: "start prompt end", failed: true, detail: "SERVER: The server had an error while processing your request. Sorry about that!"},
		// SIGINT: exit 130; the plugin is gone before the step ends, so the
		// text streamed so far is what the agent wrote, and the runner's
		// final answer is the same text.
		{name: "interrupt", types: "start prompt text end", failed: true, result: "slow slow slow "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := adapterstest.ReadCapture(t, tt.name)
			evs, v := adapterstest.Replay(t, New(), Name, c.Raw, adapters.Exit{Code: c.Exit})
			if got := adapterstest.Types(evs); got != tt.types {
				t.Errorf("types:\n got %s\nwant %s", got, tt.types)
			}
			if v.Failed != tt.failed || v.Detail != tt.detail {
				t.Errorf("verdict %+v, want failed=%v detail %q", v, tt.failed, tt.detail)
			}
			adapterstest.Check(t, evs)
			for _, err := range mockmodel.VerifyUsage(evs, c.Ledger, false) {
				t.Error(err)
			}
			end := adapterstest.End(t, evs)
			if (tt.result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != tt.result) {
				t.Errorf("result %v, want %q", end.Result, tt.result)
			}
			if p := evs[1].(*events.Prompt); p.Text == "" || p.Text[:9] != "scenario:" || len(p.Images) != 0 {
				t.Errorf("prompt %+v", p)
			}
			for _, e := range evs {
				if u, ok := e.(*events.Usage); ok && (u.Model == nil || *u.Model != "gpt-test" || u.CostUSD != nil) {
					t.Errorf("usage model %v cost %v, want gpt-test and no cost", u.Model, u.CostUSD)
				}
			}
			if tt.check != nil {
				tt.check(t, evs)
			}
		})
	}
}
