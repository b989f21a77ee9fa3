package codex

import (
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
)

// TestRealCaptures replays the real codex 0.171.0 output of the mock
// scenarios (testdata/real, see its README) and checks the unified events:
// sequence, the contract, usage against what the mock served (one usage
// per turn, input without the cached tokens; the --model value, no cost),
// result and verdict (adapterstest.Captures). The live versions of these
// runs are in test/cli.
func TestRealCaptures(t *testing.T) {
	adapterstest.Captures{Runtime: Name, ReplayModel: "gpt-5.5", TurnUsage: true, DetailPrefix: true, UsageModel: "gpt-5.5",
		Cases: []adapterstest.CaptureCase{
			{Name: "tool", Types: "start tool_start tool text usage end", Result: "Done: wrote hello.txt",
				Check: func(t *testing.T, evs []events.Event) {
					tool := eventstest.Find[*events.Tool](evs)
					if tool.Name != "command_execution" || tool.Summary != "command_execution: echo hello > hello.txt" || tool.Error == nil || *tool.Error {
						t.Errorf("tool = %+v", tool)
					}
				}},
			{Name: "parallel", Types: "start text tool_start tool tool_start tool text usage end",
				Result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done",
				Check: func(t *testing.T, evs []events.Event) {
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
			{Name: "error401", Types: "start end", Failed: true, Detail: "unexpected status 401 Unauthorized: mockmodel: Incorrect API key provided."},
			{Name: "error500", Types: "start end", Failed: true, Detail: "We’re currently experiencing high demand"},
			// SIGINT: exit 1 and no closing event; nothing was finished.
			{Name: "interrupt", Types: "start end", Failed: true},
		}}.Run(t)
}
