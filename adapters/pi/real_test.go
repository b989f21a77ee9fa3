package pi

import (
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
)

// TestRealCaptures replays the real pi 0.73.1 output of the mock scenarios
// (testdata/real, see its README) and checks the unified events: sequence,
// the contract, usage against what the mock served (one usage per call),
// pi's own cost from the prices of the captures' models.json (USD per
// million tokens), result and verdict (adapterstest.Captures). The live
// versions of these runs are in test/cli.
func TestRealCaptures(t *testing.T) {
	adapterstest.Captures{Runtime: Name, UsageModel: "gpt-test", Prices: &adapterstest.Prices{Input: 1.25, Output: 10, CacheRead: 0.125},
		Cases: []adapterstest.CaptureCase{
			{Name: "tool", Types: "start prompt usage tool_start tool text usage end", Result: "Done: wrote hello.txt",
				Check: func(t *testing.T, evs []events.Event) {
					for _, e := range evs {
						if tl, ok := e.(*events.Tool); ok && (tl.Name != "bash" || tl.Summary != "bash: echo hello > hello.txt" || tl.Denied || tl.Error == nil || *tl.Error) {
							t.Errorf("tool = %+v", tl)
						}
					}
				}},
			{Name: "parallel", Types: "start prompt text usage tool_start tool_start tool tool text usage end",
				Result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
			// pi exits 0 on API errors; the error is the last assistant message's.
			{Name: "error401", Types: "start prompt end", Failed: true, Detail: "401 mockmodel: Incorrect API key provided."},
			{Name: "error500", Types: "start prompt end", Failed: true, Detail: "500 The server had an error while processing your request. Sorry about that!"},
			// SIGINT: exit 130, no closing events; the text streamed so far is
			// what the agent wrote.
			{Name: "interrupt", Types: "start prompt text end", Failed: true, Result: "slow slow slow "},
		}}.Run(t)
}
