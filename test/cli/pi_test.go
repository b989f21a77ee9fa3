package cli

import (
	"bytes"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// piModel is the id of the mock's model in pi's models.json.
const piModel = "gpt-test"

// piCLI is the real pi CLI's row of cliRuntimes: the mock's Chat
// Completions API.
var piCLI = cliRuntime{
	name: "pi", model: piModel,
	keyVar: "OPENAI_API_KEY", baseVar: "OPENAI_BASE_URL", basePath: "/v1", retries: "AGENTRUN_MODEL_RETRIES=1",
	// Prices (USD per million tokens) so that pi's own cost is not zero:
	// input 1.25, output 10, cached input 0.125.
	env:          []string{"AGENTRUN_PI_COST=input=1.25,output=10,cache_read=0.125,cache_write=0"},
	echoesPrompt: true, checkCost: checkPiCost, checkStart: checkRunStart,
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
		{scenario: "parallel", types: "start prompt text usage tool_start tool_start tool tool text usage end", status: "finished", calls: [2]int{2, 2},
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done",
			check: func(t *testing.T, r *mockRun) {
				var got []string
				for _, e := range r.events {
					if ts, ok := e.(*events.ToolStart); ok {
						got = append(got, ts.Summary)
					}
				}
				if strings.Join(got, "|") != "bash: ls|bash: echo two" {
					t.Errorf("tools %q", got)
				}
			}},
		// pi exits 0 on API errors; the run still fails with pi's message.
		// AGENTRUN_MODEL_RETRIES=1: one retry by pi, none by its SDK.
		{scenario: "error401", types: "start prompt end", status: "failed", detail: "401 mockmodel: Incorrect API key provided.", calls: [2]int{1, 1}},
		{scenario: "error500", types: "start prompt end", status: "failed", calls: [2]int{2, 2},
			detail: "500 The server had an error while processing your request. Sorry about that!"},
	},
	interruptAfter: 5 * time.Second, timeout: 8,
	interrupted: func(t *testing.T, r *mockRun) {
		// pi does not handle SIGINT: it dies of it, with no closing events,
		// and exit_code is null as for any CLI killed by a signal (the
		// sandbox's init reports the signal; bubblewrap alone said 130).
		if end := r.end(); end.ExitCode != nil {
			t.Errorf("exit_code %d, want null (pi killed by SIGINT)", *end.ExitCode)
		}
	},
	timedOut: func(t *testing.T, r *mockRun) {
		// What the agent had written when it was stopped is kept. On a
		// loaded machine node may not have streamed anything within the
		// timeout: the raw output says whether it did.
		if !bytes.Contains(r.raw, []byte(`"text_delta"`)) {
			t.Logf("pi streamed no text before the timeout (a slow start); types %s", r.withoutNetwork())
			return
		}
		if got := r.withoutNetwork(); got != "start prompt text end" {
			t.Errorf("types %s", got)
		}
		if end := r.end(); end.Result == nil || !strings.HasPrefix(*end.Result, "slow ") {
			t.Errorf("result %v, want the text streamed so far", end.Result)
		}
	},
}

// checkPiCost: pi's own cost, from the prices agentrun put in models.json;
// every usage names the mock's model.
func checkPiCost(t *testing.T, rt *cliRuntime, r *mockRun, status string) {
	t.Helper()
	end := r.end()
	var want float64
	for _, c := range r.srv.Ledger() {
		want += (float64(c.Usage.InputTokens)*1.25 + float64(c.Usage.OutputTokens)*10 + float64(c.Usage.CacheReadTokens)*0.125) / 1e6
	}
	if status == "finished" && (end.Usage.CostUSD == nil || math.Abs(*end.Usage.CostUSD-want) > 1e-12 || want == 0) {
		t.Errorf("end cost %v, want %g", end.Usage.CostUSD, want)
	}
	if status == "failed" && !end.Usage.IsZero() {
		t.Errorf("end.usage %s for a run the API refused", show(end.Usage))
	}
	for _, e := range r.events {
		if u, ok := e.(*events.Usage); ok && (u.Model == nil || *u.Model != rt.model) {
			t.Errorf("usage model %v", u.Model)
		}
	}
}

// TestPiImage: --image reaches pi as an attachment of a copy in the run's
// state directory; the prompt event lists the caller's path and the text
// without pi's reference to the copy.
func TestPiImage(t *testing.T) {
	img := filepath.Join(t.TempDir(), "dot.png")
	// An 8x8 red PNG that pi's image resizer decodes (it omits images it
	// cannot decode, with a note in the prompt).
	png, _ := hex.DecodeString("89504e470d0a1a0a0000000d49484452000000080000000808020000004b6d29dc0000001249444154789c63f8cfc0801561171db4120028ff3fc16eecdf610000000049454e44ae426082")
	if err := os.WriteFile(img, png, 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	r := piCLI.run(t, "scenario:tool look", mockmodel.Options{RequestLog: &log}, invocation{}, "--image", img)
	p := eventstest.Find[*events.Prompt](r.events)
	if p == nil || p.Text != "scenario:tool look" || len(p.Images) != 1 || p.Images[0] != img {
		t.Fatalf("prompt %+v", p)
	}
	if end := r.end(); end == nil || end.Status != "finished" {
		t.Fatalf("end %+v", end)
	}
	if !strings.Contains(log.String(), `"url":"data:image/png;base64,`) {
		t.Errorf("the image did not reach the model")
	}
}
