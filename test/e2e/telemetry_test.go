//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
	"github.com/agentrun-dev/agentrun/telemetry/telemetrytest"
)

// collector is the suite's OpenTelemetry Collector (OTLP receiver, file
// exporter) on 127.0.0.1, shown to the Pods on the node bridge.
var collector *telemetrytest.Collector

// startCollector starts the collector and a relay to its OTLP/HTTP port on
// the node bridge, and returns a Helm values file that points the chart's
// telemetry.otlp there.
func startCollector() (string, error) {
	bin, err := telemetrytest.BuildCollector()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "agentrun-e2e-otel-")
	if err != nil {
		return "", err
	}
	if collector, err = telemetrytest.Launch(bin, dir); err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", nodeIP+":0")
	if err != nil {
		return "", err
	}
	relay(ln, collector.HTTP)
	values := filepath.Join(dir, "telemetry-values.yaml")
	err = os.WriteFile(values, []byte(fmt.Sprintf(`telemetry:
  otlp:
    endpoint: http://%s
    protocol: http/protobuf
    resourceAttributes: deployment.environment.name=e2e
`, ln.Addr())), 0o600)
	return values, err
}

// TestTelemetry: an AgentRun with agentrun.dev/traceparent exports its
// run through the chart's telemetry settings; the trace is found in the
// collector by the caller's trace id, which status.traceID shows, and its
// spans are the run's event log. A run without the annotation gets a trace
// of its own, named in its status.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	const traceID, parentID = "7d2c0a4e9f1b3c5d6e7f8091a2b3c4d5", "1a2b3c4d5e6f7081"
	_, port := startMock(t, mockmodel.Options{})
	joined := claudeRun("e2e-telemetry", "subagent", port)
	joined.annotations = map[string]string{v1alpha1.AnnotationTraceParent: "00-" + traceID + "-" + parentID + "-01"}
	own := claudeRun("e2e-telemetry-own", "parallel", port)
	joined.apply(t)
	own.apply(t)

	run := waitEnded(t, joined.name, 3*time.Minute)
	st := run.Status
	if st.Phase != v1alpha1.PhaseSucceeded || st.TraceID != traceID {
		t.Fatalf("phase %s traceID %q, want %s (detail %q)", st.Phase, st.TraceID, traceID, st.Detail)
	}
	if wide, _ := kube("get", "agentrun", joined.name, "-o", "wide"); !strings.Contains(wide, traceID) {
		t.Errorf("kubectl get -o wide does not show the trace id:\n%s", wide)
	}
	stream, _ := eventLog(t, st.PodName)
	spans, _ := collector.WaitSpans(t, traceID, time.Minute)
	for _, err := range telemetrytest.Check(spans, stream, parentID) {
		t.Error(err)
	}
	for _, s := range spans {
		if s.Resource["k8s.namespace.name"] != run.Namespace || s.Resource["agentrun.run.name"] != joined.name ||
			s.Resource["deployment.environment.name"] != "e2e" || s.Service != "agentrun" {
			t.Errorf("span %s resource %v", s.Name, s.Resource)
			break
		}
	}
	if telemetrytest.Contains(spans, "scenario:subagent") {
		t.Error("the prompt was exported without the opt-in")
	}
	t.Logf("the run's trace:\n%s", telemetrytest.Tree(spans))

	run = waitEnded(t, own.name, 3*time.Minute)
	if run.Status.Phase != v1alpha1.PhaseSucceeded || len(run.Status.TraceID) != 32 || run.Status.TraceID == traceID {
		t.Fatalf("phase %s traceID %q", run.Status.Phase, run.Status.TraceID)
	}
	stream, _ = eventLog(t, run.Status.PodName)
	spans, _ = collector.WaitSpans(t, run.Status.TraceID, time.Minute)
	for _, err := range telemetrytest.Check(spans, stream, "") {
		t.Error(err)
	}
	if t.Failed() {
		t.Logf("collector:\n%s", collector.Log())
	}
}
