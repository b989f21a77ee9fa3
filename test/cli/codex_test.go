package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// codexModel is a model codex 0.171.0 knows, so it runs with its own
// metadata for it (and warns about nothing).
const codexModel = "gpt-5.5"

// codexCLI is the real codex CLI's row of cliRuntimes: the mock's
// Responses API.
var codexCLI = cliRuntime{
	name: "codex", model: codexModel,
	keyVar: "OPENAI_API_KEY", baseVar: "OPENAI_BASE_URL", basePath: "/v1", retries: "AGENTRUN_MODEL_RETRIES=1",
	echoesPrompt: false, detailPrefix: true,
	// One usage per turn: the sum of the turn's calls, the input without
	// the cached tokens, the --model value, no cost.
	turnUsage: true, checkCost: usageModelNoCost, checkStart: checkRunStart,
	scenarios: []cliScenario{
		{scenario: "tool", types: "start prompt tool_start tool text usage end", status: "finished", result: "Done: wrote hello.txt", calls: [2]int{2, 2},
			check: func(t *testing.T, r *mockRun) {
				tool := eventstest.Find[*events.Tool](r.events)
				// The command itself, not codex's `/bin/bash -lc '...'`.
				if tool == nil || tool.Name != "command_execution" || tool.Summary != "command_execution: echo hello > hello.txt" || tool.Error == nil || *tool.Error || tool.Denied {
					t.Errorf("tool = %+v", tool)
				}
				if b, err := os.ReadFile(filepath.Join(r.workdir, "hello.txt")); err != nil || string(b) != "hello\n" {
					t.Errorf("the agent's command did not run in --cwd: %q %v", b, err)
				}
			}},
		// codex runs the two commands at once: the first may end before
		// or after the second starts.
		{scenario: "parallel", types: "start prompt text tool_start tool tool_start tool text usage end | start prompt text tool_start tool_start tool tool text usage end",
			status: "finished", calls: [2]int{2, 2},
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done",
			check: func(t *testing.T, r *mockRun) {
				var got []string
				for _, e := range r.events {
					if tl, ok := e.(*events.Tool); ok {
						got = append(got, tl.Summary)
					}
				}
				slices.Sort(got)
				if strings.Join(got, "|") != "command_execution: echo two|command_execution: ls" {
					t.Errorf("tools %q", got)
				}
				if text := eventstest.Find[*events.Text](r.events); text == nil || text.Text != "Running two commands in parallel." {
					t.Errorf("first text %+v", text)
				}
			}},
		// AGENTRUN_MODEL_RETRIES=1 caps codex's request and stream retries
		// at one each: 2 calls for a 401, 4 for a 500 (not codex's 5 and 4
		// with back-off).
		{scenario: "error401", types: "start prompt end", status: "failed", exitCode: 1, calls: [2]int{2, 2},
			detail: "unexpected status 401 Unauthorized: mockmodel: Incorrect API key provided."},
		{scenario: "error500", types: "start prompt end", status: "failed", exitCode: 1, calls: [2]int{2, 4},
			detail: "We’re currently experiencing high demand"},
	},
	interruptAfter: 8 * time.Second, timeout: 8,
	interrupted: func(t *testing.T, r *mockRun) {
		// codex exits 1 on SIGINT without a closing event.
		if end := r.end(); end.ExitCode == nil || *end.ExitCode != 1 {
			t.Errorf("exit_code %s, want codex's 1", show(end.ExitCode))
		}
	},
	timedOut: func(t *testing.T, r *mockRun) {
		if got := r.withoutNetwork(); got != "start prompt end" {
			t.Errorf("types %s", got)
		}
		// The slow reply was streaming when codex stopped: the mock saw
		// the client go away. On a loaded machine codex may not have asked
		// yet, or may have dropped a stream and asked again (its retry of a
		// broken stream); it never got an answer either way.
		for _, c := range r.srv.Ledger() {
			if !c.Aborted || c.Scenario != "slow" || c.Step != 0 {
				t.Errorf("a call was answered: %+v", c)
			}
		}
	},
}

// TestCodexNoSubagents: --no-subagents takes codex's multi-agent tools
// away from the model. With a model it has no metadata for, codex offers
// them in every request (for its own models it defers them behind
// tool_search); it then also writes a warning item, which is no failure.
func TestCodexNoSubagents(t *testing.T) {
	for _, off := range []bool{false, true} {
		var log strings.Builder
		var extra []string
		if off {
			extra = append(extra, "--no-subagents")
		}
		r := codexCLI.withModel("gpt-test").run(t, "scenario:tool go", mockmodel.Options{RequestLog: &log}, invocation{}, extra...)
		if end := r.end(); end == nil || end.Status != "finished" {
			t.Fatalf("end %+v", end)
		}
		if offered := strings.Contains(log.String(), `"spawn_agent"`); offered == off {
			t.Errorf("--no-subagents=%v: the request offers spawn_agent: %v", off, offered)
		}
	}
}
