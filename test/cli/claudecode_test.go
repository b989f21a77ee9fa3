package cli

import (
	"bytes"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
	"github.com/agentrun-dev/agentrun/sandbox"
)

// claudeCodeCLI is the real claude-code CLI's row of cliRuntimes.
var claudeCodeCLI = cliRuntime{
	name: "claude-code", model: "sonnet",
	keyVar: "ANTHROPIC_API_KEY", baseVar: "ANTHROPIC_BASE_URL", retries: "CLAUDE_CODE_MAX_RETRIES=1",
	echoesPrompt: true, runTimeout: 3 * time.Minute,
	networkInTypes: true, detailPrefix: true,
	checkStart: checkStart, checkCost: checkClaudeCodeCost,
	scenarios: []cliScenario{
		{scenario: "tool", types: "start prompt tool_start usage tool text usage end", status: "finished",
			result: "Done: wrote hello.txt", check: func(t *testing.T, r *mockRun) {
				tool := eventstest.Find[*events.Tool](r.events)
				if tool.Name != "Bash" || tool.Summary != "Bash: echo hello > hello.txt" || tool.Error == nil || *tool.Error {
					t.Errorf("tool = %+v", tool)
				}
				if b, err := os.ReadFile(filepath.Join(r.workdir, "hello.txt")); err != nil || string(b) != "hello\n" {
					t.Errorf("the agent's command did not run in --cwd: %q %v", b, err)
				}
			}},
		{scenario: "parallel", types: "start prompt text tool_start tool_start usage tool tool text usage end", status: "finished",
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		{scenario: "subagent", types: "start prompt text subagent_start usage tool_start tool usage tool_start tool usage subagent_end text usage end",
			status: "finished", result: "Main done after subagent", check: checkSubagent},
		{scenario: "background", status: "finished", result: "Background result received", check: checkSubagent},
		{scenario: "denied", types: "start prompt tool_start usage tool text usage end", status: "finished",
			result: "The command was denied; stopping here.", check: func(t *testing.T, r *mockRun) {
				tool := eventstest.Find[*events.Tool](r.events)
				if !tool.Denied || tool.Error == nil || *tool.Error {
					t.Errorf("denied: %+v", tool)
				}
			}},
		{scenario: "error401", types: "start prompt end", status: "failed", exitCode: 1, detail: "Invalid API key"},
		{scenario: "error500", types: "start prompt end", status: "failed", exitCode: 1, detail: "API Error: 500"},
	},
	interruptAfter: 4 * time.Second, timeout: 4,
	timedOut: func(t *testing.T, r *mockRun) {
		// What was received before the timeout is kept.
		if eventstest.Find[*events.Prompt](r.events) == nil {
			t.Errorf("the prompt event is missing: %s", r.types())
		}
	},
}

// checkClaudeCodeCost: the cost is the CLI's own total; null when it
// reported no model usage.
func checkClaudeCodeCost(t *testing.T, _ *cliRuntime, r *mockRun, status string) {
	t.Helper()
	end := r.end()
	if want := lastResultCost(r.raw); status == "finished" && (want == nil || end.Usage.CostUSD == nil || *end.Usage.CostUSD != *want) {
		t.Errorf("end cost %v, the CLI's total_cost_usd %v", end.Usage.CostUSD, want)
	}
	if status == "failed" && end.Usage.CostUSD != nil {
		t.Errorf("cost %v with empty modelUsage, want null", *end.Usage.CostUSD)
	}
}

func checkSubagent(t *testing.T, r *mockRun) {
	start := eventstest.Find[*events.SubagentStart](r.events)
	end := eventstest.Find[*events.SubagentEnd](r.events)
	if start == nil || end == nil || start.Number != 1 || start.Kind != "general-purpose" || end.ID != start.ID || end.Status != "finished" {
		t.Fatalf("subagent start %+v end %+v", start, end)
	}
	inner := 0
	for _, e := range r.events {
		if ts, ok := e.(*events.ToolStart); ok {
			inner++
			if ts.Parent == nil || *ts.Parent != start.ID {
				t.Errorf("tool %s in the subagent has parent %v", ts.Name, ts.Parent)
			}
		}
		if _, ok := e.(*events.Tool); ok && e.(*events.Tool).ID == start.ID {
			t.Errorf("the Agent call must not show as a tool event")
		}
	}
	if inner != 2 { // Bash, then SubagentHandback
		t.Errorf("%d tool calls inside the subagent, want 2", inner)
	}
	if end.Usage.InputTokens == nil || *end.Usage.InputTokens != 40+41 {
		t.Errorf("subagent_end input %v, want the subagent's calls 40+41", end.Usage.InputTokens)
	}
}

// checkStart checks the start event of a real claude-code run.
func checkStart(t *testing.T, _ *cliRuntime, r *result) {
	start, ok := r.events[0].(*events.Start)
	if !ok {
		t.Fatalf("first event %T", r.events[0])
	}
	if start.Runtime != "claude-code" || start.Model == nil || *start.Model != "sonnet" {
		t.Errorf("start = %+v", start)
	}
	want := []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_MAX_RETRIES"}
	if strings.Join(start.Env, ",") != strings.Join(want, ",") {
		t.Errorf("start.env = %v, want only the names %v", start.Env, want)
	}
	home, _ := user.Current()
	wantDeny := sandbox.DefaultDenyRead(r.home, home.HomeDir)
	if start.Sandbox != "bubblewrap" || !start.Network.Enforced || start.Network.Mode != "custom" || len(start.Network.Allow) != 2 ||
		strings.Join(start.DenyRead, " ") != strings.Join(wantDeny, " ") {
		t.Errorf("start sandbox %q network %+v deny_read %v", start.Sandbox, start.Network, start.DenyRead)
	}
	line := r.stdout[:bytes.IndexByte(r.stdout, '\n')]
	if bytes.Contains(line, []byte("test-key")) || bytes.Contains(line, []byte("please")) {
		t.Errorf("start leaks a value or the prompt: %s", line)
	}
	real, _ := filepath.EvalSymlinks(r.workdir)
	if start.Cwd != real {
		t.Errorf("cwd %q, want %q", start.Cwd, real)
	}
}

func TestClaudeCodeLimits(t *testing.T) {
	tests := []struct {
		name, flag, value, detail string
	}{
		{"turns", "--max-turns", "1", "--max-turns 1 reached: the main agent started model call 2"},
		{"tokens", "--max-tokens", "50", "--max-tokens 50 reached: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runScenario(t, "tool", mockmodel.Options{}, tt.flag, tt.value)
			end := r.end()
			if end == nil || end.Status != events.StatusLimit || !strings.HasPrefix(end.Detail, tt.detail) || r.exit != 3 {
				t.Fatalf("end %+v exit %d; want limit with detail %q", end, r.exit, tt.detail)
			}
		})
	}
}

func TestClaudeCodeNoSubagents(t *testing.T) {
	// The mock calls the Agent tool only when the request offers it: with
	// --no-subagents the CLI must not offer it.
	r := runScenario(t, "subagent", mockmodel.Options{}, "--no-subagents")
	if end := r.end(); end == nil || end.Result == nil || *end.Result != mockmodel.NoSubagentToolReply {
		t.Errorf("the CLI still offered the subagent tool: %s", r.types())
	}
	for _, e := range r.events {
		if _, ok := e.(*events.SubagentStart); ok {
			t.Fatalf("a subagent started despite --no-subagents: %s", r.types())
		}
	}
	start := r.events[0].(*events.Start)
	if !strings.Contains(strings.Join(start.Argv, " "), "--disallowedTools Task Agent") {
		t.Errorf("argv %v", start.Argv)
	}
}

func TestClaudeCodeSessionResume(t *testing.T) {
	srv, _ := mockmodel.Start(mockmodel.Options{})
	defer srv.Close()
	ws, sessions := t.TempDir(), t.TempDir()
	args := append(claudeArgs(t, srv, true), "--cwd", ws, "--session-dir", sessions)
	env := []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t)}
	first := runAgentrun(t, invocation{args: args, prompt: "scenario:tool first", env: env})
	end := first.end()
	if end == nil || end.Status != "finished" || end.SessionID == nil {
		t.Fatalf("first run end %+v", end)
	}
	saved := filepath.Join(sessions, "claude-code", *end.SessionID+".jsonl")
	if _, err := os.Stat(saved); err != nil {
		t.Fatalf("session not saved: %v", err)
	}
	second := runAgentrun(t, invocation{args: append(args, "--resume", *end.SessionID), prompt: "scenario:tool again", env: env})
	end2 := second.end()
	if end2 == nil || end2.Status != "finished" || end2.SessionID == nil || *end2.SessionID != *end.SessionID {
		t.Fatalf("resumed run end %+v", end2)
	}
	// The resumed conversation carried the first run's turns: the mock saw
	// a later step of the script.
	ledger := srv.Ledger()
	if last := ledger[len(ledger)-1]; last.Step < 2 {
		t.Errorf("the resumed run started from step %d: the history was not restored", last.Step)
	}
	unknown := runAgentrun(t, invocation{args: append(args, "--resume", "no-such-id"), prompt: "x", env: env})
	if e := unknown.end(); e == nil || e.Status != events.StatusRejected || len(unknown.events) != 1 {
		t.Errorf("unknown --resume: %s %+v", unknown.types(), e)
	}
}

// TestClaudeCodeWithoutSandbox: --sandbox none talks to the mock directly
// and says so.
func TestClaudeCodeWithoutSandbox(t *testing.T) {
	r := runScenarioUnsandboxed(t, "tool", mockmodel.Options{})
	end := r.end()
	if end == nil || end.Status != "finished" || end.Result == nil || *end.Result != "Done: wrote hello.txt" {
		t.Fatalf("end %+v", end)
	}
	start := r.events[0].(*events.Start)
	if start.Sandbox != "none" || start.Network.Enforced || len(start.DenyRead) != 0 {
		t.Errorf("start %+v", start)
	}
	for _, err := range mockmodel.VerifyUsage(r.events, r.srv.Ledger(), false) {
		t.Error(err)
	}
}

// TestClaudeCodeDeniedHost: the agent's command reaches for a host that is
// not on the list; the proxy refuses it and the stream says so.
func TestClaudeCodeDeniedHost(t *testing.T) {
	r := runScenario(t, "nethost", mockmodel.Options{})
	end := r.end()
	if end == nil || end.Status != "finished" {
		t.Fatalf("end %+v", end)
	}
	var denied *events.NetworkAccess
	for _, e := range r.events {
		if n, ok := e.(*events.NetworkAccess); ok && !n.Allowed {
			denied = n
		}
	}
	if denied == nil || denied.Host != "blocked.example" || denied.Port != 80 || denied.Reason == nil || *denied.Reason != events.ReasonNotAllowed {
		t.Fatalf("no not_allowed network event for blocked.example:80: %s", r.types())
	}
	tool := eventstest.Find[*events.Tool](r.events)
	if tool == nil || tool.Error == nil || !*tool.Error || tool.Denied {
		t.Errorf("the refused command must show as a tool error, not a denial: %+v", tool)
	}
}

// TestClaudeCodeOverHTTPS is the production path: the model API over TLS,
// reached with CONNECT through the filter proxy, the CA trusted through
// the variable claude-code reads (NODE_EXTRA_CA_CERTS).
func TestClaudeCodeOverHTTPS(t *testing.T) {
	srv, err := mockmodel.Start(mockmodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ws := t.TempDir()
	caFile := filepath.Join(ws, "test-ca.pem") // the workspace is visible in the sandbox
	front := tlsFront(t, srv.URL(), mockHost, caFile)
	_, port, _ := net.SplitHostPort(front)
	args := []string{"--runtime", "claude-code", "--model", "sonnet", "--cwd", ws,
		"--env", "ANTHROPIC_API_KEY=test-key", "--env", "CLAUDE_CODE_MAX_RETRIES=1",
		"--env", "ANTHROPIC_BASE_URL=https://" + mockHost + ":" + port, "--env", "NODE_EXTRA_CA_CERTS=" + caFile,
		"--add-host", mockHost + "=127.0.0.1", "--allow-host", mockHost + ":" + port, "--allow-host", "127.0.0.1:" + port}
	r := runAgentrun(t, invocation{args: args, prompt: "scenario:tool over tls", env: []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t)}})
	end := r.end()
	if end == nil || end.Status != "finished" || end.Result == nil || *end.Result != "Done: wrote hello.txt" {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	n := eventstest.Find[*events.NetworkAccess](r.events)
	if n == nil || n.Host != mockHost || strconv.Itoa(n.Port) != port || !n.Allowed {
		t.Errorf("network event %+v, want the CONNECT to %s:%s", n, mockHost, port)
	}
	for _, err := range mockmodel.VerifyUsage(r.events, srv.Ledger(), false) {
		t.Error(err)
	}
}

// TestClaudeCodeImage: --image goes to the CLI as an image block of the
// stream-json user message; the prompt event lists the path as given.
func TestClaudeCodeImage(t *testing.T) {
	img := filepath.Join(t.TempDir(), "dot.png")
	// A 1x1 PNG.
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")
	if err := os.WriteFile(img, png, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runScenario(t, "tool", mockmodel.Options{}, "--image", img)
	p := eventstest.Find[*events.Prompt](r.events)
	if p == nil || len(p.Images) != 1 || p.Images[0] != img || !strings.Contains(p.Text, "scenario:tool") {
		t.Fatalf("prompt %+v", p)
	}
	if end := r.end(); end == nil || end.Status != "finished" {
		t.Fatalf("end %+v", end)
	}
}
