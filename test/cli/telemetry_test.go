package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
	"github.com/agentrun-dev/agentrun/telemetry/telemetrytest"
)

// The caller's trace each run continues (a CI pipeline's, say).
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
)

func callerTraceParent(traceID string) string { return "00-" + traceID + "-" + callerSpanID + "-01" }

// claudeRun is a real claude-code run in the sandbox against a fresh mock,
// with extra environment for agentrun.
func claudeRun(t *testing.T, scenario string, env []string, extra ...string) *mockRun {
	t.Helper()
	srv, err := mockmodel.Start(mockmodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append(claudeArgs(t, srv, true), "--cwd", ws), extra...)
	r := runAgentrun(t, invocation{args: args, prompt: scenario,
		env: append([]string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t)}, env...)})
	r.workdir = ws
	return &mockRun{srv: srv, result: r}
}

// checkTrace reads the run's trace back from the collector and checks it
// against the run's own event stream: it continues the caller's trace, its
// span tree is the event tree, its chat spans add up to end.usage, and the
// prompt and the answer are not in it.
func checkTrace(t *testing.T, col *telemetrytest.Collector, r *mockRun, traceID, prompt string) []telemetrytest.Span {
	t.Helper()
	start, ok := r.events[0].(*events.Start)
	if !ok || start.TraceID != traceID {
		t.Fatalf("start.trace_id %q, want the TRACEPARENT's %s", start.TraceID, traceID)
	}
	spans, metrics := col.WaitSpans(t, traceID, 30*time.Second)
	if len(spans) == 0 {
		t.Fatalf("no span of trace %s reached the collector; agentrun's stderr:\n%s\ncollector:\n%s", traceID, r.stderr, col.Log())
	}
	for _, err := range telemetrytest.Check(spans, r.events, callerSpanID) {
		t.Error(err)
	}
	end := r.end()
	if telemetrytest.Contains(spans, prompt) || (end.Result != nil && telemetrytest.Contains(spans, *end.Result)) {
		t.Errorf("the prompt or the result was exported without the opt-in")
	}
	seen := map[string]bool{}
	for _, m := range metrics {
		seen[m.Name] = true
	}
	for _, name := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "agentrun.runs"} {
		if !seen[name] {
			t.Errorf("metric %s not exported", name)
		}
	}
	if bytes.Contains(r.stderr, []byte("telemetry:")) {
		t.Errorf("a telemetry warning with a working collector:\n%s", r.stderr)
	}
	return spans
}

// TestTelemetryClaudeCode: a real claude-code run with a subagent and tool
// calls, exported over OTLP/HTTP to a real collector.
func TestTelemetryClaudeCode(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	const prompt = "scenario:subagent please"
	r := claudeRun(t, prompt, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.HTTPURL(), "TRACEPARENT=" + callerTraceParent(callerTraceID),
		"OTEL_SERVICE_NAME=ci-agent", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test"})
	if end := r.end(); end == nil || end.Status != events.StatusFinished {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	for _, err := range mockmodel.VerifyUsage(r.events, r.srv.Ledger(), false) {
		t.Error(err)
	}
	spans := checkTrace(t, col, r, callerTraceID, prompt)
	t.Logf("the run's trace:\n%s", telemetrytest.Tree(spans))
	var subagents, tools, chats int
	for _, s := range spans {
		switch {
		case s.ParentID != callerSpanID && strings.HasPrefix(s.Name, "invoke_agent "):
			subagents++
		case strings.HasPrefix(s.Name, "execute_tool "):
			tools++
		case strings.HasPrefix(s.Name, "chat"):
			chats++
		}
		if s.Service != "ci-agent" || s.Resource["deployment.environment.name"] != "test" {
			t.Errorf("span %s resource %v: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES not applied", s.Name, s.Resource)
		}
	}
	if subagents != 1 || tools < 2 || chats < 3 {
		t.Errorf("%d subagent, %d tool, %d chat spans: %v", subagents, tools, chats, spanNames(spans))
	}
}

// TestTelemetryCodex: codex over OTLP/gRPC, with the content opt-in.
func TestTelemetryCodex(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	const traceID = "5b8efff798038103d269b633813fc60c"
	const prompt = "scenario:parallel please"
	r := codexCLI.run(t, prompt, mockmodel.Options{}, invocation{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.GRPCURL(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"TRACEPARENT=" + callerTraceParent(traceID)}})
	if end := r.end(); end == nil || end.Status != events.StatusFinished {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	spans := checkTrace(t, col, r, traceID, prompt)
	if n := countPrefix(spans, "execute_tool "); n != 2 {
		t.Errorf("%d execute_tool spans, want codex's 2 commands: %v", n, spanNames(spans))
	}
}

// TestTelemetryPi: pi with --otlp-endpoint, the latest GenAI conventions
// and the content opt-in: the prompt is exported then, and pi's own cost
// per call adds up.
func TestTelemetryPi(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	const traceID = "6c9f00089914921e437ac744924ed71d"
	const prompt = "scenario:parallel please"
	r := piCLI.run(t, prompt, mockmodel.Options{}, invocation{env: []string{"TRACEPARENT=" + callerTraceParent(traceID),
		"OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"}},
		"--otlp-endpoint", col.HTTPURL())
	end := r.end()
	if end == nil || end.Status != events.StatusFinished || end.Usage.CostUSD == nil || *end.Usage.CostUSD == 0 {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	spans, _ := col.WaitSpans(t, traceID, 30*time.Second)
	for _, err := range telemetrytest.Check(spans, r.events, callerSpanID) {
		t.Error(err)
	}
	if !telemetrytest.Contains(spans, prompt) {
		t.Error("the prompt is not exported with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true")
	}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "chat") && (s.Str("gen_ai.provider.name") != "openai" || s.Str("gen_ai.system") != "") {
			t.Errorf("%s: provider %q system %q under gen_ai_latest_experimental", s.Name, s.Str("gen_ai.provider.name"), s.Str("gen_ai.system"))
		}
	}
	if n := countPrefix(spans, "execute_tool "); n != 2 {
		t.Errorf("%d execute_tool spans: %v", n, spanNames(spans))
	}
}

// TestTelemetryCollectorGone: a collector that is down or never answers
// changes nothing in the run: the same end, result and usage as the mock
// served, and one warning line.
func TestTelemetryCollectorGone(t *testing.T) {
	hole := telemetrytest.StartBlackHole(t)
	for name, endpoint := range map[string]string{"refused": telemetrytest.ClosedPort(t), "black hole": hole.URL()} {
		t.Run(name, func(t *testing.T) {
			r := claudeRun(t, "scenario:tool please", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint})
			end := r.end()
			if end == nil || end.Status != events.StatusFinished || r.exit != 0 || end.Result == nil || *end.Result != "Done: wrote hello.txt" {
				t.Fatalf("end %+v exit %d\nstderr %s", end, r.exit, r.stderr)
			}
			for _, err := range mockmodel.VerifyUsage(r.events, r.srv.Ledger(), false) {
				t.Error(err)
			}
			if n := bytes.Count(r.stderr, []byte("[agentrun] telemetry:")); n != 1 {
				t.Errorf("%d telemetry warnings, want one:\n%s", n, r.stderr)
			}
		})
	}
	if hole.Accepted() == 0 {
		t.Error("nothing reached the black hole")
	}
}

// TestTelemetryNotInTheAgentsEnvironment: the exporter's variables stay
// agentrun's, in the sandbox and without, also through --pass-env.
func TestTelemetryNotInTheAgentsEnvironment(t *testing.T) {
	hole := telemetrytest.StartBlackHole(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + hole.URL(), "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer secret-otlp-token",
		"TRACEPARENT=" + callerTraceParent(callerTraceID), "TRACESTATE=vendor=x"}
	for _, tc := range []struct {
		name    string
		command string
		extra   []string
	}{
		// In the sandbox the agent sees no process of agentrun's.
		{"sandbox", `env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'`, []string{"--pass-env", "OTEL_*", "--pass-env", "TRACE*"}},
		// Without one it could read agentrun's /proc (the documented
		// no-sandbox caveat); its own environment is clean.
		{"no sandbox", "env", []string{"--sandbox", "none", "--pass-env", "OTEL_*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := mockmodel.Start(mockmodel.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			ws := t.TempDir()
			args := append(append(claudeArgs(t, srv, tc.name == "sandbox"), "--cwd", ws), tc.extra...)
			r := runAgentrun(t, invocation{args: args, prompt: "scenario:probe probe<<<" + tc.command + ">>>",
				env: append([]string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t)}, env...)})
			end := r.end()
			if end == nil || end.Result == nil || !strings.HasPrefix(*end.Result, mockmodel.ProbeAnswerPrefix) || !strings.Contains(*end.Result, "HOME=") {
				t.Fatalf("the probe did not run: %+v\n%s", end, r.stderr)
			}
			for _, leak := range []string{"OTEL_", "TRACEPARENT", "TRACESTATE", "secret-otlp-token"} {
				if strings.Contains(*end.Result, leak) {
					t.Errorf("the agent's environment holds %s:\n%s", leak, *end.Result)
				}
			}
		})
	}
	// Named on its own, a telemetry variable is refused, not dropped
	// silently.
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--pass-env", "TRACEPARENT"}, prompt: "hi", env: env})
	if end := r.end(); end == nil || end.Status != events.StatusRejected || !strings.Contains(end.Detail, "--pass-env TRACEPARENT") {
		t.Errorf("--pass-env TRACEPARENT: %+v", end)
	}
}

func countPrefix(spans []telemetrytest.Span, prefix string) int {
	n := 0
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			n++
		}
	}
	return n
}

func spanNames(spans []telemetrytest.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestTelemetryInterrupted: a run stopped in the middle of a model call
// (SIGINT to agentrun) still adds up: the partial usage of the call that
// was cut is a chat span, and the root says why the run did not finish.
func TestTelemetryInterrupted(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	const traceID = "8e1d0b5f0a2c4d6e8f0a1b2c3d4e5f60"
	srv, err := mockmodel.Start(mockmodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const prompt = "scenario:slow tell a story"
	r := &mockRun{srv: srv, result: runAgentrun(t, invocation{args: append(claudeArgs(t, srv, true), "--cwd", t.TempDir()), prompt: prompt,
		env:    []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t), "OTEL_EXPORTER_OTLP_ENDPOINT=" + col.HTTPURL(), "TRACEPARENT=" + callerTraceParent(traceID)},
		signal: interruptAfter(4*time.Second, syscall.SIGINT)})}
	end := r.end()
	if end == nil || end.Status != events.StatusInterrupted {
		t.Fatalf("end %+v; want interrupted", end)
	}
	spans := checkTrace(t, col, r, traceID, prompt)
	for _, s := range spans {
		if s.ParentID == callerSpanID && (s.Str("error.type") != "interrupted" || s.Status != "Error") {
			t.Errorf("root error.type %q status %q, want interrupted", s.Str("error.type"), s.Status)
		}
	}
	if countPrefix(spans, "chat") == 0 {
		t.Errorf("no chat span for the cut call: %v", spanNames(spans))
	}
}
