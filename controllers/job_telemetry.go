package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/telemetry"
)

// AnnotationTraceID on a Job is its run's trace id, which computeStatus
// copies into status.traceID.
const AnnotationTraceID = "agentrun.dev/trace-id"

// Telemetry is where the runners export their runs (the chart's
// telemetry.otlp values, the manager's --otlp-* flags): the standard
// OTEL_* variables of the runner's container, never the agent's (the
// runner keeps them out of the sandbox). The runner talks to the collector
// directly, not through the agent's filter proxy.
type Telemetry struct {
	// Endpoint is OTEL_EXPORTER_OTLP_ENDPOINT, the collector's URL.
	Endpoint string
	// Protocol is OTEL_EXPORTER_OTLP_PROTOCOL: grpc or http/protobuf.
	Protocol string
	// Headers is OTEL_EXPORTER_OTLP_HEADERS (key=value,...), e.g. a
	// back end's API key.
	Headers string
	// ServiceName is OTEL_SERVICE_NAME (agentrun when empty).
	ServiceName string
	// ResourceAttributes are added to OTEL_RESOURCE_ATTRIBUTES, before the
	// run's own (k8s.namespace.name, k8s.job.name, agentrun.run.name).
	ResourceAttributes string
	// SemconvOptIn is OTEL_SEMCONV_STABILITY_OPT_IN.
	SemconvOptIn string
	// CaptureContent exports prompts, texts and results
	// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT).
	CaptureContent bool
}

// Validate checks the manager's flags.
func (t *Telemetry) Validate() error {
	u, err := url.Parse(t.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--otlp-endpoint %q: pass the collector's URL, for example http://otel-collector.observability:4318", t.Endpoint)
	}
	if t.Protocol != telemetry.ProtocolGRPC && t.Protocol != telemetry.ProtocolHTTP {
		return fmt.Errorf("--otlp-protocol %q: pass grpc or http/protobuf", t.Protocol)
	}
	return nil
}

// runTrace is the run's trace: the annotation's traceparent when it is
// one, with its trace id; else no traceparent and a trace id derived from
// the run's uid, so that every reconcile (and the Job) names the same new
// trace. Both empty without telemetry.
func runTrace(run *v1alpha1.AgentRun, t *Telemetry) (traceparent, traceID string) {
	if t == nil {
		return "", ""
	}
	if tp := strings.TrimSpace(run.Annotations[v1alpha1.AnnotationTraceParent]); tp != "" {
		if id, err := telemetry.ParseTraceParent(tp); err == nil {
			return tp, id
		}
	}
	sum := sha256.Sum256([]byte("agentrun.dev/trace:" + string(run.UID)))
	id := hex.EncodeToString(sum[:16])
	if !telemetry.ValidTraceID(id) {
		id = "00000000000000000000000000000001" // all zero, once in 2^128
	}
	return "", id
}

// InvalidTraceParent reports an agentrun.dev/traceparent annotation that is
// set but not a traceparent (with telemetry on), for an Event.
func InvalidTraceParent(run *v1alpha1.AgentRun, t *Telemetry) error {
	tp := strings.TrimSpace(run.Annotations[v1alpha1.AnnotationTraceParent])
	if t == nil || tp == "" {
		return nil
	}
	_, err := telemetry.ParseTraceParent(tp)
	return err
}

// telemetryEnv is the runner's telemetry configuration: the collector, the
// caller's trace, and the run as resource attributes.
func telemetryEnv(run *v1alpha1.AgentRun, t *Telemetry) []corev1.EnvVar {
	if t == nil {
		return nil
	}
	env := []corev1.EnvVar{{Name: telemetry.EnvEndpoint, Value: t.Endpoint}}
	add := func(name, value string) {
		if value != "" {
			env = append(env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	add(telemetry.EnvProtocol, t.Protocol)
	add("OTEL_EXPORTER_OTLP_HEADERS", t.Headers)
	service := t.ServiceName
	if service == "" {
		service = telemetry.ServiceName
	}
	add("OTEL_SERVICE_NAME", service)
	attrs := []string{}
	if a := strings.Trim(strings.TrimSpace(t.ResourceAttributes), ","); a != "" {
		attrs = append(attrs, a)
	}
	// Kubernetes names are DNS labels and subdomains: nothing to escape.
	attrs = append(attrs, "k8s.namespace.name="+run.Namespace, "k8s.job.name="+JobName(run.Name), "agentrun.run.name="+run.Name)
	add("OTEL_RESOURCE_ATTRIBUTES", strings.Join(attrs, ","))
	add(telemetry.EnvSemconvOptIn, t.SemconvOptIn)
	if t.CaptureContent {
		add(telemetry.EnvCaptureContent, "true")
	}
	if tp, _ := runTrace(run, t); tp != "" {
		add(telemetry.EnvTraceParent, tp)
		if ts := strings.TrimSpace(run.Annotations[v1alpha1.AnnotationTraceState]); ts != "" && len(ts) <= 512 {
			add(telemetry.EnvTraceState, ts)
		}
	}
	return env
}

// newTraceID is the new trace the runner starts (RunFlags.NewTraceID)
// when the run continues none; "" otherwise.
func newTraceID(run *v1alpha1.AgentRun, t *Telemetry) string {
	tp, id := runTrace(run, t)
	if tp != "" {
		return ""
	}
	return id
}
