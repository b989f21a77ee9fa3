package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// codexModel is a model codex 0.171.0 knows, so it runs with its own
// metadata for it (and warns about nothing).
const codexModel = "gpt-5.5"

func codexBin(t *testing.T) string { return cliBin(t, "codex", "AGENTRUN_CODEX_BIN", "codex") }

func codexRun(t *testing.T, prompt string, inv invocation, extra ...string) *mockRun {
	t.Helper()
	return openAIRun(t, "codex", codexModel, "AGENTRUN_CODEX_BIN", codexBin(t), prompt, extra, inv)
}

// TestCodexScenarios runs the real codex CLI through agentrun run, in the
// sandbox, against the mock's Responses API through the proxy, and checks
// the unified events.
func TestCodexScenarios(t *testing.T) {
	tests := []struct {
		scenario string
		types    string // without network events (checkNetwork); " | " between orders timing may give
		status   string
		exitCode int // codex's
		agentrun int
		result   string
		detail   string // prefix
		calls    [2]int // the least and most model calls the mock served
		check    func(t *testing.T, r *mockRun)
	}{
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
		{scenario: "error401", types: "start prompt end", status: "failed", exitCode: 1, agentrun: 1, calls: [2]int{2, 2},
			detail: "unexpected status 401 Unauthorized: mockmodel: Incorrect API key provided."},
		{scenario: "error500", types: "start prompt end", status: "failed", exitCode: 1, agentrun: 1, calls: [2]int{2, 4},
			detail: "We’re currently experiencing high demand"},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			r := codexRun(t, "scenario:"+tt.scenario+" please", invocation{})
			end := r.end()
			if end == nil {
				t.Fatalf("no end event; stderr:\n%s", r.stderr)
			}
			if got := r.withoutNetwork(); !slices.Contains(strings.Split(tt.types, " | "), got) {
				t.Errorf("types:\n got %s\nwant %s", got, tt.types)
			}
			checkNetwork(t, r)
			if end.Status != tt.status || end.ExitCode == nil || *end.ExitCode != tt.exitCode || r.exit != tt.agentrun {
				t.Errorf("end %s exit_code %v, agentrun exit %d; want %s %d %d (detail %q)", end.Status, end.ExitCode, r.exit, tt.status, tt.exitCode, tt.agentrun, end.Detail)
			}
			if !strings.HasPrefix(end.Detail, tt.detail) {
				t.Errorf("detail %q, want prefix %q", end.Detail, tt.detail)
			}
			if (tt.result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != tt.result) {
				t.Errorf("result %v, want %q", end.Result, tt.result)
			}
			ledger := r.srv.Ledger()
			if n := len(ledger); n < tt.calls[0] || n > tt.calls[1] {
				t.Errorf("the mock served %d calls, want %d to %d", n, tt.calls[0], tt.calls[1])
			}
			// One usage per turn: the sum of the turn's calls, the input
			// without the cached tokens, the --model value, no cost.
			for _, err := range mockmodel.VerifyTurnUsage(r.events, ledger) {
				t.Error(err)
			}
			for _, e := range r.events {
				if u, ok := e.(*events.Usage); ok && (u.Model == nil || *u.Model != codexModel || u.CostUSD != nil) {
					t.Errorf("usage model %v cost %v", u.Model, u.CostUSD)
				}
			}
			checkOpenAIStart(t, r.result, "codex", codexModel)
			checkRawReplays(t, r.result, false)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// checkOpenAIStart checks the start and prompt events of a codex or pi run.
func checkOpenAIStart(t *testing.T, r *result, runtime, model string) {
	t.Helper()
	start, ok := r.events[0].(*events.Start)
	if !ok {
		t.Fatalf("first event %T", r.events[0])
	}
	if start.Runtime != runtime || start.Model == nil || *start.Model != model || start.Sandbox != "bubblewrap" || !start.Network.Enforced {
		t.Errorf("start %+v", start)
	}
	if want := []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTRUN_MODEL_RETRIES"}; len(start.Env) < 3 || !slices.Equal(start.Env[:3], want) {
		t.Errorf("start.env %v, want the names %v first", start.Env, want)
	}
	if strings.Contains(strings.Join(start.Argv, " "), "please") || strings.Contains(string(r.stdout[:200]), "test-key") {
		t.Errorf("start shows the prompt or a value: %v", start.Argv)
	}
	if p := eventstest.Find[*events.Prompt](r.events); p == nil || !strings.HasPrefix(p.Text, "scenario:") || len(p.Images) != 0 {
		t.Errorf("prompt %+v", p)
	}
}

func TestCodexInterruptAndTimeout(t *testing.T) {
	t.Run("SIGINT to agentrun", func(t *testing.T) {
		r := codexRun(t, "scenario:slow tell a story", invocation{signal: interruptAfter(8*time.Second, syscall.SIGINT)})
		end := r.end()
		if end == nil || end.Status != events.StatusInterrupted || r.exit != 130 || end.Detail != "" {
			t.Fatalf("end %+v, agentrun exit %d; want interrupted, 130", end, r.exit)
		}
		// codex exits 1 on SIGINT without a closing event.
		if end.ExitCode == nil || *end.ExitCode != 1 {
			t.Errorf("exit_code %v, want codex's 1", end.ExitCode)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		r := codexRun(t, "scenario:slow tell a story", invocation{}, "--timeout", "8")
		end := r.end()
		if end == nil || end.Status != events.StatusTimeout || end.Detail != "--timeout 8 reached" || r.exit != 124 {
			t.Fatalf("end %+v, exit %d; want timeout with detail --timeout 8 reached", end, r.exit)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the timeout took %s to stop the run", took)
		}
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
	})
}

// TestCodexNoSubagents: --no-subagents takes codex's multi-agent tools
// away from the model. With a model it has no metadata for, codex offers
// them in every request (for its own models it defers them behind
// tool_search); it then also writes a warning item, which is no failure.
func TestCodexNoSubagents(t *testing.T) {
	for _, off := range []bool{false, true} {
		var log strings.Builder
		srv, err := mockmodel.Start(mockmodel.Options{RequestLog: &log})
		if err != nil {
			t.Fatal(err)
		}
		args := append(openAIArgs(srv, "codex", "gpt-test"), "--cwd", t.TempDir())
		if off {
			args = append(args, "--no-subagents")
		}
		r := runAgentrun(t, invocation{args: args, prompt: "scenario:tool go", env: []string{"AGENTRUN_CODEX_BIN=" + codexBin(t)}})
		srv.Close()
		if end := r.end(); end == nil || end.Status != "finished" {
			t.Fatalf("end %+v", end)
		}
		if offered := strings.Contains(log.String(), `"spawn_agent"`); offered == off {
			t.Errorf("--no-subagents=%v: the request offers spawn_agent: %v", off, offered)
		}
	}
}
