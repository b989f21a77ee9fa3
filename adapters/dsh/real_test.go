package dsh

import (
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
)

// TestRealCaptures replays the real dsh 0.1.0-rc.8 output of the mock
// scenarios (testdata/real, see its README) and checks the unified events:
// sequence, the contract, usage against what the mock served (one usage
// per step, gpt-test, no cost), result and verdict
// (adapterstest.Captures). The live versions of these runs are in
// test/cli.
func TestRealCaptures(t *testing.T) {
	adapterstest.Captures{Runtime: Name, UsageModel: "gpt-test", Cases: []adapterstest.CaptureCase{
		{Name: "tool", Types: "start prompt usage tool_start tool text usage end", Result: "Done: wrote hello.txt",
			Check: func(t *testing.T, evs []events.Event) {
				for _, e := range evs {
					if tl, ok := e.(*events.Tool); ok && (tl.Name != "bash" || tl.Summary != "bash: echo hello > hello.txt" || tl.Denied || tl.Error == nil || *tl.Error) {
						t.Errorf("tool = %+v", tl)
					}
				}
			}},
		// dsh runs the two calls of one reply one after the other.
		{Name: "parallel", Types: "start prompt text usage tool_start tool tool_start tool text usage end",
			Result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		// The proxy refuses the host, curl exits 22: dsh's isError is false,
		// its "[exit code: 22]" marker makes the call an error.
		{Name: "nethost", Types: "start prompt usage tool_start tool text usage end", Result: "The host was blocked.",
			Check: func(t *testing.T, evs []events.Event) {
				if tl := eventstest.Find[*events.Tool](evs); tl == nil || tl.Error == nil || !*tl.Error || tl.Denied {
					t.Errorf("tool = %+v", tl)
				}
			}},
		// The headless runner exits 1; the turn's end has dsh's error.
		{Name: "error401", Types: "start prompt end", Failed: true, Detail: "AUTH: mockmodel: Incorrect API key provided."},
		{Name: "error500", Types: "start prompt end", Failed: true, Detail: "SERVER: The server had an error while processing your request. Sorry about that!"},
		// SIGINT: exit 130; the plugin is gone before the step ends, so the
		// text streamed so far is what the agent wrote, and the runner's
		// final answer is the same text.
		{Name: "interrupt", Types: "start prompt text end", Failed: true, Result: "slow slow slow "},
	}}.Run(t)
}
