package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// dshModel is the model agentrun selects for dsh's DeepSeek provider; the
// mock serves any.
const dshModel = "gpt-test"

// dshCLI is the real dsh CLI's row of cliRuntimes (its headless profile):
// the mock's Chat Completions API, with dsh's own variables.
var dshCLI = cliRuntime{
	name: "dsh", model: dshModel,
	keyVar: "DEEPSEEK_API_KEY", baseVar: "DEEPSEEK_BASE_URL", basePath: "/v1", retries: "AGENTRUN_MODEL_RETRIES=1",
	echoesPrompt: true, shellScrubsKey: true, checkCost: usageModelNoCost, checkStart: checkRunStart,
	scenarios: []cliScenario{
		{scenario: "tool", types: "start prompt usage tool_start tool text usage end", status: "finished", result: "Done: wrote hello.txt", calls: [2]int{2, 2},
			check: func(t *testing.T, r *mockRun) {
				tool := eventstest.Find[*events.Tool](r.events)
				if tool == nil || tool.Name != "bash" || tool.Summary != "bash: echo hello > hello.txt" || tool.Error == nil || *tool.Error || tool.Denied {
					t.Errorf("tool = %+v", tool)
				}
				if b, err := os.ReadFile(filepath.Join(r.workdir, "hello.txt")); err != nil || string(b) != "hello\n" {
					t.Errorf("the agent's command did not run in --cwd: %q %v", b, err)
				}
			}},
		// dsh runs the two calls of one reply one after the other.
		{scenario: "parallel", types: "start prompt text usage tool_start tool tool_start tool text usage end", status: "finished", calls: [2]int{2, 2},
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		// The headless runner exits 1 when the turn fails; AUTH is not
		// retried, SERVER once (AGENTRUN_MODEL_RETRIES=1). No session-title
		// call either way.
		{scenario: "error401", types: "start prompt end", status: "failed", exitCode: 1, calls: [2]int{1, 1},
			detail: "AUTH: mockmodel: Incorrect API key provided."},
		{scenario: "error500", types: "start prompt end", status: "failed", exitCode: 1, calls: [2]int{2, 2},
			detail: "SERVER: The server had an error while processing your request. Sorry about that!"},
	},
	interruptAfter: 5 * time.Second, timeout: 8,
	interrupted: func(t *testing.T, r *mockRun) {
		// dsh handles SIGINT: it disposes its plugins and exits 130.
		end := r.end()
		if end.ExitCode == nil || *end.ExitCode != 130 {
			t.Errorf("exit_code %s, want dsh's 130", show(end.ExitCode))
		}
		if end.Result == nil || !strings.HasPrefix(*end.Result, "slow ") {
			t.Errorf("result %v, want the text streamed so far", end.Result)
		}
	},
}

// TestDshNoSubagents: --no-subagents takes dsh's subagent tools away from
// the model.
func TestDshNoSubagents(t *testing.T) {
	for _, off := range []bool{false, true} {
		var log strings.Builder
		var extra []string
		if off {
			extra = append(extra, "--no-subagents")
		}
		r := dshCLI.run(t, "scenario:tool go", mockmodel.Options{RequestLog: &log}, invocation{}, extra...)
		if end := r.end(); end == nil || end.Status != "finished" {
			t.Fatalf("end %+v; stderr:\n%s", end, r.stderr)
		}
		for _, tool := range []string{`"name":"subagent"`, `"name":"subagent_fork"`, `"name":"workflow"`} {
			if offered := strings.Contains(log.String(), tool); offered == off {
				t.Errorf("--no-subagents=%v: the request offers %s: %v", off, tool, offered)
			}
		}
	}
}

// TestDshImage: dsh's headless mode takes no images; --image is refused
// before dsh starts.
func TestDshImage(t *testing.T) {
	img := filepath.Join(t.TempDir(), "dot.png")
	if err := os.WriteFile(img, []byte("\x89PNG"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := dshCLI.run(t, "scenario:tool look", mockmodel.Options{}, invocation{}, "--image", img)
	if end := r.end(); end == nil || end.Status != events.StatusRejected || !strings.Contains(end.Detail, "no images") || len(r.events) != 1 {
		t.Fatalf("events %s, end %+v", r.types(), end)
	}
}
