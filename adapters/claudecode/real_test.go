package claudecode

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestRealCaptures replays the real claude-code 2.1.328 output of every mock
// scenario (testdata/real, see its README) and checks the unified events:
// sequence, the contract, usage against what the mock served, result and
// verdict. The live versions of these runs are in test/.
func TestRealCaptures(t *testing.T) {
	tests := []struct {
		name   string
		types  string
		failed bool
		detail string // prefix
		result string
		// nullOutput: the run had no message_delta lines, so the main
		// agent's output counts are unknown.
		nullOutput bool
		check      func(t *testing.T, evs []events.Event)
	}{
		{name: "tool", types: "start prompt tool_start usage tool text usage end", result: "Done: wrote hello.txt"},
		{name: "tool-nopartial", types: "start prompt tool_start usage tool text usage end", result: "Done: wrote hello.txt", nullOutput: true},
		{name: "parallel", types: "start prompt text tool_start tool_start usage tool tool text usage end",
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		{name: "subagent", types: "start prompt text subagent_start usage tool_start tool usage tool_start tool usage subagent_end text usage end",
			result: "Main done after subagent", check: checkOneSubagent},
		{name: "background", types: "start prompt text subagent_start usage text usage tool_start tool usage tool_start tool usage subagent_end text usage end",
			result: "Background result received", check: checkOneSubagent},
		{name: "denied", types: "start prompt tool_start usage tool text usage end", result: "The command was denied; stopping here.",
			check: func(t *testing.T, evs []events.Event) {
				tool := eventstest.Find[*events.Tool](evs)
				if !tool.Denied || tool.Error == nil || *tool.Error {
					t.Errorf("denied call: denied=%v error=%v, want true and false", tool.Denied, tool.Error)
				}
			}},
		{name: "error401", types: "start prompt end", failed: true, detail: "Invalid API key"},
		{name: "error500", types: "start prompt end", failed: true, detail: "API Error: 500"},
		// The text the agent was writing when interrupted is what was received.
		{name: "interrupt", types: "start prompt text usage end", failed: true, detail: "[ede_diagnostic]", result: "slow slow slow slow slow "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := filepath.Join("testdata", "real", tt.name)
			raw, err := os.ReadFile(base + ".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			code, err := readExit(base + ".exit")
			if err != nil {
				t.Fatal(err)
			}
			evs, v := replay(t, string(raw), adapters.Exit{Code: code})
			if got := adapterstest.Types(evs); got != tt.types {
				t.Errorf("types:\n got %s\nwant %s", got, tt.types)
			}
			if v.Failed != tt.failed || !strings.HasPrefix(v.Detail, tt.detail) {
				t.Errorf("verdict %+v, want failed=%v detail %q...", v, tt.failed, tt.detail)
			}
			var buf bytes.Buffer
			for _, e := range evs {
				b, _ := events.Marshal(e)
				buf.Write(append(b, '\n'))
			}
			for _, err := range eventstest.Check(buf.Bytes()) {
				t.Error(err)
			}
			ledger, err := mockmodel.ReadLedger(base + ".ledger")
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range mockmodel.VerifyUsage(evs, ledger, tt.nullOutput) {
				t.Error(err)
			}
			end := adapterstest.End(t, evs)
			switch {
			case tt.result == "" && end.Result != nil:
				t.Errorf("result = %q, want null", *end.Result)
			case tt.result != "" && (end.Result == nil || *end.Result != tt.result):
				t.Errorf("result = %v, want %q", end.Result, tt.result)
			}
			if tt.check != nil {
				tt.check(t, evs)
			}
		})
	}
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

func readExit(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
