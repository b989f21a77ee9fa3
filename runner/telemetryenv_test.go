package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/podcontract"
)

// TestTelemetryVariablesStayAgentruns: OTEL_*, TRACEPARENT and TRACESTATE
// configure agentrun's exporter and never reach the agent: not inherited
// without a sandbox, not through a --pass-env pattern, and a --pass-env
// naming one is refused.
func TestTelemetryVariablesStayAgentruns(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer secret")
	t.Setenv("TRACEPARENT", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	t.Setenv("OTELX_NOT_TELEMETRY", "kept")
	none, err := newIsolation(podcontract.SandboxFlags{Sandbox: "none"}, fakeWS("/work"))
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(none.env("/h", nil, nil))
	if _, ok := env["OTEL_EXPORTER_OTLP_HEADERS"]; ok {
		t.Error("OTEL_EXPORTER_OTLP_HEADERS inherited without a sandbox")
	}
	if _, ok := env["TRACEPARENT"]; ok {
		t.Error("TRACEPARENT inherited without a sandbox")
	}
	if env["OTELX_NOT_TELEMETRY"] != "kept" {
		t.Error("a variable that only starts like OTEL was dropped")
	}
	passed, err := passedEnv([]string{"OTEL*", "TRACE*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range passed {
		if kv[0] != "OTELX_NOT_TELEMETRY" {
			t.Errorf("--pass-env pattern passed %s", kv[0])
		}
	}
	_, err = passedEnv([]string{"OTEL_EXPORTER_OTLP_HEADERS"})
	var rj rejection
	if !errors.As(err, &rj) || !strings.Contains(rj.msg, "agentrun's own telemetry") {
		t.Errorf("--pass-env OTEL_EXPORTER_OTLP_HEADERS: %v", err)
	}
}
