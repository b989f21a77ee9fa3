package claudecode

import (
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
)

// TestRealCaptures replays the real claude-code 2.1.328 output of every mock
// scenario (testdata/real, see its README) and checks the unified events:
// sequence, the contract, usage against what the mock served, result and
// verdict (adapterstest.Captures). The live versions of these runs are in
// test/cli.
func TestRealCaptures(t *testing.T) {
	adapterstest.Captures{Runtime: Name, DetailPrefix: true, Cases: []adapterstest.CaptureCase{
		{Name: "tool", Types: "start prompt tool_start usage tool text usage end", Result: "Done: wrote hello.txt"},
		// The run had no message_delta lines, so the main agent's output
		// counts are unknown.
		{Name: "tool-nopartial", Types: "start prompt tool_start usage tool text usage end", Result: "Done: wrote hello.txt", NullOutput: true},
		{Name: "parallel", Types: "start prompt text tool_start tool_start usage tool tool text usage end",
			Result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		{Name: "subagent", Types: "start prompt text subagent_start usage tool_start tool usage tool_start tool usage subagent_end text usage end",
			Result: "Main done after subagent", Check: checkOneSubagent},
		{Name: "background", Types: "start prompt text subagent_start usage text usage tool_start tool usage tool_start tool usage subagent_end text usage end",
			Result: "Background result received", Check: checkOneSubagent},
		{Name: "denied", Types: "start prompt tool_start usage tool text usage end", Result: "The command was denied; stopping here.",
			Check: func(t *testing.T, evs []events.Event) {
				tool := eventstest.Find[*events.Tool](evs)
				if !tool.Denied || tool.Error == nil || *tool.Error {
					t.Errorf("denied call: denied=%v error=%v, want true and false", tool.Denied, tool.Error)
				}
			}},
		{Name: "error401", Types: "start prompt end", Failed: true, Detail: "Invalid API key"},
		{Name: "error500", Types: "start prompt end", Failed: true, Detail: "API Error: 500"},
		// The text the agent was writing when interrupted is what was received.
		{Name: "interrupt", Types: "start prompt text usage end", Failed: true, Detail: "[ede_diagnostic]", Result: "slow slow slow slow slow "},
	}}.Run(t)
}

// checkOneSubagent: one general-purpose subagent, its events parented to it,
// its end carrying its own usage.
func checkOneSubagent(t *testing.T, evs []events.Event) {
	start := eventstest.Find[*events.SubagentStart](evs)
	end := eventstest.Find[*events.SubagentEnd](evs)
	if start.Number != 1 || start.Kind != "general-purpose" || start.Parent != nil || end.ID != start.ID || end.Status != "finished" {
		t.Errorf("subagent start %+v end %+v", start, end)
	}
	var in int64
	for _, e := range evs {
		switch e := e.(type) {
		case *events.ToolStart:
			if e.Parent == nil || *e.Parent != start.ID {
				t.Errorf("tool %s parent %v, want the subagent %s", e.Name, e.Parent, start.ID)
			}
		case *events.Usage:
			if e.Parent != nil {
				in += *e.InputTokens
			}
		}
	}
	if end.Usage.InputTokens == nil || *end.Usage.InputTokens != in {
		t.Errorf("subagent_end input %v, want the sum of its usage events %d", end.Usage.InputTokens, in)
	}
}
