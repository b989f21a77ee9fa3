package cli

import (
	"bytes"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// piModel is the id of the mock's model in pi's models.json.
const piModel = "gpt-test"

// piCost gives pi prices (USD per million tokens) so that its own cost is
// not zero: input 1.25, output 10, cached input 0.125.
const piCost = "AGENTRUN_PI_COST=input=1.25,output=10,cache_read=0.125,cache_write=0"

func piBin(t *testing.T) string { return cliBin(t, "pi", "AGENTRUN_PI_BIN", "pi") }

func piRun(t *testing.T, prompt string, inv invocation, extra ...string) *mockRun {
	t.Helper()
	return openAIRun(t, "pi", piModel, "AGENTRUN_PI_BIN", piBin(t), prompt, append([]string{"--env", piCost}, extra...), inv)
}

// TestPiScenarios runs the real pi CLI through agentrun run, in the
// sandbox, against the mock's Chat Completions API through the proxy, and
// checks the unified events.
func TestPiScenarios(t *testing.T) {
	tests := []struct {
		scenario string
		types    string // without network events (checkNetwork)
		status   string
		result   string
		detail   string
		calls    int // model calls the mock served
		check    func(t *testing.T, r *mockRun)
	}{
		{scenario: "tool", types: "start prompt usage tool_start tool text usage end", status: "finished", result: "Done: wrote hello.txt", calls: 2,
			check: func(t *testing.T, r *mockRun) {
				tool := eventstest.Find[*events.Tool](r.events)
				if tool == nil || tool.Name != "bash" || tool.Summary != "bash: echo hello > hello.txt" || tool.Error == nil || *tool.Error || tool.Denied {
					t.Errorf("tool = %+v", tool)
				}
				if b, err := os.ReadFile(filepath.Join(r.workdir, "hello.txt")); err != nil || string(b) != "hello\n" {
					t.Errorf("the agent's command did not run in --cwd: %q %v", b, err)
				}
			}},
		{scenario: "parallel", types: "start prompt text usage tool_start tool_start tool tool text usage end", status: "finished", calls: 2,
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
		{scenario: "error401", types: "start prompt end", status: "failed", detail: "401 mockmodel: Incorrect API key provided.", calls: 1},
		{scenario: "error500", types: "start prompt end", status: "failed", calls: 2,
			detail: "500 The server had an error while processing your request. Sorry about that!"},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			r := piRun(t, "scenario:"+tt.scenario+" please", invocation{})
			end := r.end()
			if end == nil {
				t.Fatalf("no end event; stderr:\n%s", r.stderr)
			}
			if got := r.withoutNetwork(); got != tt.types {
				t.Errorf("types:\n got %s\nwant %s", got, tt.types)
			}
			checkNetwork(t, r)
			agentrunExit := map[string]int{"finished": 0, "failed": 1}[tt.status]
			if end.Status != tt.status || end.ExitCode == nil || *end.ExitCode != 0 || r.exit != agentrunExit || end.Detail != tt.detail {
				t.Errorf("end %s exit_code %v detail %q, agentrun exit %d; want %s, pi's 0, %q, %d", end.Status, end.ExitCode, end.Detail, r.exit, tt.status, tt.detail, agentrunExit)
			}
			if (tt.result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != tt.result) {
				t.Errorf("result %v, want %q", end.Result, tt.result)
			}
			ledger := r.srv.Ledger()
			if len(ledger) != tt.calls {
				t.Errorf("the mock served %d calls, want %d", len(ledger), tt.calls)
			}
			for _, err := range mockmodel.VerifyUsage(r.events, ledger, false) {
				t.Error(err)
			}
			// pi's own cost, from the prices agentrun put in models.json.
			var want float64
			for _, c := range ledger {
				want += (float64(c.Usage.InputTokens)*1.25 + float64(c.Usage.OutputTokens)*10 + float64(c.Usage.CacheReadTokens)*0.125) / 1e6
			}
			if tt.status == "finished" && (end.Usage.CostUSD == nil || math.Abs(*end.Usage.CostUSD-want) > 1e-12 || want == 0) {
				t.Errorf("end cost %v, want %g", end.Usage.CostUSD, want)
			}
			if tt.status == "failed" && !end.Usage.IsZero() {
				t.Errorf("end.usage %s for a run the API refused", show(end.Usage))
			}
			for _, e := range r.events {
				if u, ok := e.(*events.Usage); ok && (u.Model == nil || *u.Model != piModel) {
					t.Errorf("usage model %v", u.Model)
				}
			}
			checkOpenAIStart(t, r.result, "pi", piModel)
			checkRawReplays(t, r.result, true)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestPiInterruptAndTimeout(t *testing.T) {
	t.Run("SIGINT to agentrun", func(t *testing.T) {
		r := piRun(t, "scenario:slow tell a story", invocation{signal: interruptAfter(5*time.Second, syscall.SIGINT)})
		end := r.end()
		if end == nil || end.Status != events.StatusInterrupted || r.exit != 130 || end.Detail != "" {
			t.Fatalf("end %+v, agentrun exit %d; want interrupted, 130", end, r.exit)
		}
		// pi does not handle SIGINT: it dies of it, with no closing events,
		// and exit_code is null as for any CLI killed by a signal (the
		// sandbox's init reports the signal; bubblewrap alone said 130).
		if end.ExitCode != nil {
			t.Errorf("exit_code %d, want null (pi killed by SIGINT)", *end.ExitCode)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		r := piRun(t, "scenario:slow tell a story", invocation{}, "--timeout", "8")
		end := r.end()
		if end == nil || end.Status != events.StatusTimeout || end.Detail != "--timeout 8 reached" || r.exit != 124 {
			t.Fatalf("end %+v, exit %d; want timeout with detail --timeout 8 reached", end, r.exit)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the timeout took %s to stop the run", took)
		}
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
		if end.Result == nil || !strings.HasPrefix(*end.Result, "slow ") {
			t.Errorf("result %v, want the text streamed so far", end.Result)
		}
	})
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
	srv, err := mockmodel.Start(mockmodel.Options{RequestLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	args := append(openAIArgs(srv, "pi", piModel), "--cwd", t.TempDir(), "--image", img)
	r := runAgentrun(t, invocation{args: args, prompt: "scenario:tool look", env: []string{"AGENTRUN_PI_BIN=" + piBin(t)}})
	srv.Close()
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
