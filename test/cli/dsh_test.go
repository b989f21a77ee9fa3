package cli

import (
	"net/url"
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

// dshModel is the model agentrun selects for dsh's DeepSeek provider; the
// mock serves any.
const dshModel = "gpt-test"

func dshBin(t *testing.T) string { return cliBin(t, "dsh", "AGENTRUN_DSH_BIN", "dsh") }

// dshArgs points dsh at the mock's Chat Completions API the way
// openAIArgs does for codex and pi, with dsh's own variables.
func dshArgs(srv *mockmodel.Server) []string {
	u, _ := url.Parse(srv.URL())
	return []string{"--runtime", "dsh", "--model", dshModel,
		"--env", "DEEPSEEK_API_KEY=test-key", "--env", "DEEPSEEK_BASE_URL=http://" + mockHost + ":" + u.Port() + "/v1",
		"--env", "AGENTRUN_MODEL_RETRIES=1",
		"--add-host", mockHost + "=127.0.0.1", "--allow-host", mockHost + ":" + u.Port(), "--allow-host", "127.0.0.1:" + u.Port()}
}

// dshRun runs dsh through agentrun in the sandbox against a fresh mock
// (its requests logged to log when given), in a workspace holding
// notes.txt.
func dshRun(t *testing.T, prompt string, inv invocation, log *strings.Builder, extra ...string) *mockRun {
	t.Helper()
	opts := mockmodel.Options{}
	if log != nil {
		opts.RequestLog = log
	}
	srv, err := mockmodel.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv.args = append(append(dshArgs(srv), "--cwd", ws), extra...)
	inv.prompt = prompt
	inv.env = append(inv.env, "AGENTRUN_DSH_BIN="+dshBin(t))
	if inv.timeout == 0 {
		inv.timeout = time.Minute
	}
	r := runAgentrun(t, inv)
	r.workdir = ws
	return &mockRun{srv: srv, result: r}
}

// TestDshScenarios runs the real dsh CLI (headless profile) through
// agentrun run, in the sandbox, against the mock's Chat Completions API
// through the proxy, and checks the unified events.
func TestDshScenarios(t *testing.T) {
	tests := []struct {
		scenario string
		types    string // without network events (checkNetwork)
		status   string
		exitCode int // dsh's
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
		// dsh runs the two calls of one reply one after the other.
		{scenario: "parallel", types: "start prompt text usage tool_start tool tool_start tool text usage end", status: "finished", calls: 2,
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		// The headless runner exits 1 when the turn fails; AUTH is not
		// retried, SERVER once (AGENTRUN_MODEL_RETRIES=1).
		{scenario: "error401", types: "start prompt end", status: "failed", exitCode: 1, calls: 1,
			detail: "AUTH: mockmodel: Incorrect API key provided."},
		{scenario: "error500", types: "start prompt end", status: "failed", exitCode: 1, calls: 2,
			detail: "SERVER: The server had an error while processing your request. Sorry about that!"},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			r := dshRun(t, "scenario:"+tt.scenario+" please", invocation{}, nil)
			end := r.end()
			if end == nil {
				t.Fatalf("no end event; stderr:\n%s", r.stderr)
			}
			if got := r.withoutNetwork(); got != tt.types {
				t.Errorf("types:\n got %s\nwant %s\nstderr:\n%s", got, tt.types, r.stderr)
			}
			checkNetwork(t, r)
			agentrunExit := map[string]int{"finished": 0, "failed": 1}[tt.status]
			if end.Status != tt.status || end.ExitCode == nil || *end.ExitCode != tt.exitCode || r.exit != agentrunExit || end.Detail != tt.detail {
				t.Errorf("end %s exit_code %v detail %q, agentrun exit %d; want %s, dsh's %d, %q, %d", end.Status, end.ExitCode, end.Detail, r.exit, tt.status, tt.exitCode, tt.detail, agentrunExit)
			}
			if (tt.result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != tt.result) {
				t.Errorf("result %v, want %q", end.Result, tt.result)
			}
			ledger := r.srv.Ledger()
			if len(ledger) != tt.calls {
				t.Errorf("the mock served %d calls, want %d (no session-title call)", len(ledger), tt.calls)
			}
			for _, err := range mockmodel.VerifyUsage(r.events, ledger, false) {
				t.Error(err)
			}
			for _, e := range r.events {
				if u, ok := e.(*events.Usage); ok && (u.Model == nil || *u.Model != dshModel || u.CostUSD != nil) {
					t.Errorf("usage model %v cost %v", u.Model, u.CostUSD)
				}
			}
			checkDshStart(t, r.result)
			checkRawReplays(t, r.result, true)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// checkDshStart checks the start and prompt events of a dsh run.
func checkDshStart(t *testing.T, r *result) {
	t.Helper()
	start, ok := r.events[0].(*events.Start)
	if !ok {
		t.Fatalf("first event %T", r.events[0])
	}
	if start.Runtime != "dsh" || start.Model == nil || *start.Model != dshModel || start.Sandbox != "bubblewrap" || !start.Network.Enforced {
		t.Errorf("start %+v", start)
	}
	if want := []string{"DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "AGENTRUN_MODEL_RETRIES"}; len(start.Env) < 3 || !slices.Equal(start.Env[:3], want) {
		t.Errorf("start.env %v, want the names %v first", start.Env, want)
	}
	if strings.Contains(strings.Join(start.Argv, " "), "please") || strings.Contains(string(r.stdout[:200]), "test-key") {
		t.Errorf("start shows the prompt or a value: %v", start.Argv)
	}
	if p := eventstest.Find[*events.Prompt](r.events); p == nil || !strings.HasPrefix(p.Text, "scenario:") || len(p.Images) != 0 {
		t.Errorf("prompt %+v", p)
	}
}

func TestDshInterruptAndTimeout(t *testing.T) {
	t.Run("SIGINT to agentrun", func(t *testing.T) {
		r := dshRun(t, "scenario:slow tell a story", invocation{signal: interruptAfter(5*time.Second, syscall.SIGINT)}, nil)
		end := r.end()
		if end == nil || end.Status != events.StatusInterrupted || r.exit != 130 || end.Detail != "" {
			t.Fatalf("end %+v, agentrun exit %d; want interrupted, 130", end, r.exit)
		}
		// dsh handles SIGINT: it disposes its plugins and exits 130.
		if end.ExitCode == nil || *end.ExitCode != 130 {
			t.Errorf("exit_code %v, want dsh's 130", end.ExitCode)
		}
		if end.Result == nil || !strings.HasPrefix(*end.Result, "slow ") {
			t.Errorf("result %v, want the text streamed so far", end.Result)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		r := dshRun(t, "scenario:slow tell a story", invocation{}, nil, "--timeout", "8")
		end := r.end()
		if end == nil || end.Status != events.StatusTimeout || end.Detail != "--timeout 8 reached" || r.exit != 124 {
			t.Fatalf("end %+v, exit %d; want timeout with detail --timeout 8 reached", end, r.exit)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the timeout took %s to stop the run", took)
		}
	})
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
		r := dshRun(t, "scenario:tool go", invocation{}, &log, extra...)
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
	r := dshRun(t, "scenario:tool look", invocation{}, nil, "--image", img)
	if end := r.end(); end == nil || end.Status != events.StatusRejected || !strings.Contains(end.Detail, "no images") || len(r.events) != 1 {
		t.Fatalf("events %s, end %+v", r.types(), end)
	}
}
