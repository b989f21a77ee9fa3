package controllers

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/telemetry"
)

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func TestJobTelemetry(t *testing.T) {
	otlp := &Telemetry{Endpoint: "http://col.obs:4318", Protocol: "grpc", Headers: "api-key=k", ResourceAttributes: "team=ml,",
		SemconvOptIn: telemetry.OptInLatest}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name        string
		cfg         *Telemetry
		annotations map[string]string
		override    map[string]string // podOverrides.annotations
		traceID     string            // "" without telemetry; "derived" for the uid's
		traceparent string
		event       bool // TraceParentIgnored
	}{
		{name: "off", cfg: nil, annotations: map[string]string{v1alpha1.AnnotationTraceParent: tp}},
		{name: "off, a forged trace id in the Pod annotations", cfg: nil, override: map[string]string{AnnotationTraceID: "5b8efff798038103d269b633813fc60c"}},
		{name: "a new trace", cfg: otlp, traceID: "derived"},
		{name: "the caller's trace", cfg: otlp, annotations: map[string]string{v1alpha1.AnnotationTraceParent: " " + tp + " ", v1alpha1.AnnotationTraceState: "v=1"},
			traceID: "4bf92f3577b34da6a3ce929d0e0e4736", traceparent: tp},
		{name: "not a traceparent", cfg: otlp, annotations: map[string]string{v1alpha1.AnnotationTraceParent: "00-xyz"}, traceID: "derived", event: true},
		{name: "a forged trace id is replaced", cfg: otlp, override: map[string]string{AnnotationTraceID: "5b8efff798038103d269b633813fc60c"}, traceID: "derived"},
	}
	_, derived := runTrace(newRun("r", nil), otlp)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := newRun("r", func(s *v1alpha1.AgentRunSpec) {
				s.Env = []corev1.EnvVar{{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://agent-chosen:4318"}} // the CRD refuses it; the chart's wins anyway
				if tt.override != nil {
					s.PodOverrides = &v1alpha1.PodOverrides{Annotations: tt.override}
				}
			})
			run.Annotations = tt.annotations
			job := BuildJob(run, JobConfig{RunnerImage: "img", Telemetry: tt.cfg})
			agent := job.Spec.Template.Spec.Containers[0]
			env := envOf(agent)
			want := tt.traceID
			if want == "derived" {
				want = derived
			}
			if got := job.Annotations[AnnotationTraceID]; got != want {
				t.Errorf("trace id annotation %q, want %q", got, want)
			}
			st := computeStatus(v1alpha1.AgentRunStatus{}, 1, observation{Job: job}, nil)
			if st.TraceID != want {
				t.Errorf("status.traceID %q, want %q", st.TraceID, want)
			}
			if (InvalidTraceParent(run, tt.cfg) != nil) != tt.event {
				t.Errorf("InvalidTraceParent %v", InvalidTraceParent(run, tt.cfg))
			}
			if tt.cfg == nil {
				if _, ok := env["OTEL_EXPORTER_OTLP_ENDPOINT"]; ok || slices.Contains(agent.Args, "--trace-id") || len(agent.Env) != 0 {
					t.Errorf("telemetry off changed the Job: %v %v", env, agent.Args)
				}
				return
			}
			if env["OTEL_EXPORTER_OTLP_ENDPOINT"] != otlp.Endpoint || env["OTEL_EXPORTER_OTLP_PROTOCOL"] != "grpc" ||
				env["OTEL_EXPORTER_OTLP_HEADERS"] != "api-key=k" || env["OTEL_SERVICE_NAME"] != "agentrun" ||
				env["OTEL_SEMCONV_STABILITY_OPT_IN"] != telemetry.OptInLatest ||
				env["OTEL_RESOURCE_ATTRIBUTES"] != "team=ml,k8s.namespace.name=ns,k8s.job.name=r,agentrun.run.name=r" {
				t.Errorf("env %v", env)
			}
			if _, ok := env[telemetry.EnvCaptureContent]; ok {
				t.Error("content captured without the opt-in")
			}
			if env["TRACEPARENT"] != tt.traceparent {
				t.Errorf("TRACEPARENT %q, want %q", env["TRACEPARENT"], tt.traceparent)
			}
			if tt.traceparent != "" && env["TRACESTATE"] != "v=1" {
				t.Errorf("TRACESTATE %q", env["TRACESTATE"])
			}
			hasFlag := slices.Contains(agent.Args, "--trace-id")
			if hasFlag != (tt.traceparent == "") || (hasFlag && agent.Args[slices.Index(agent.Args, "--trace-id")+1] != want) {
				t.Errorf("args %v", agent.Args)
			}
			// The flags end with "--" (the prompt is a file, --prompt-file).
			if n := len(agent.Args); agent.Args[n-1] != "--" || (hasFlag && slices.Index(agent.Args, "--trace-id") > n-1) {
				t.Errorf("args %v: --trace-id after the flags' end", agent.Args)
			}
			// The user's OTEL_ variable is never handed to the agent.
			for i, a := range agent.Args {
				if a == "--pass-env" && strings.HasPrefix(agent.Args[i+1], "OTEL_") {
					t.Errorf("--pass-env %s", agent.Args[i+1])
				}
			}
		})
	}
	if !telemetry.ValidTraceID(derived) {
		t.Errorf("derived trace id %q", derived)
	}
	if _, other := runTrace(newRun("r2", func(s *v1alpha1.AgentRunSpec) {}), otlp); other != derived {
		// newRun gives every run the same uid: the id follows the uid only.
		t.Errorf("trace id depends on more than the uid")
	}
}

func TestTelemetryFlags(t *testing.T) {
	for _, tc := range []struct {
		t  Telemetry
		ok bool
	}{
		{Telemetry{Endpoint: "http://c:4318", Protocol: "http/protobuf"}, true},
		{Telemetry{Endpoint: "https://c:4317", Protocol: "grpc"}, true},
		{Telemetry{Endpoint: "c:4318", Protocol: "grpc"}, false},
		{Telemetry{Endpoint: "http://c:4318", Protocol: "http/json"}, false},
	} {
		if err := tc.t.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.t, err)
		}
	}
}

func TestRecordGenAI(t *testing.T) {
	run := newRun("g", func(s *v1alpha1.AgentRunSpec) { s.Model = "sonnet" })
	run.Status = v1alpha1.AgentRunStatus{EndStatus: "timeout", DurationMs: ptr.To[int64](2500),
		Usage: &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: ptr.To[int64](30), OutputTokens: ptr.To[int64](7), CacheReadTokens: ptr.To[int64](100)},
			ByModel: map[string]v1alpha1.TokenCounts{
				"claude-sonnet-5-5":   {InputTokens: ptr.To[int64](10), OutputTokens: ptr.To[int64](5), CacheReadTokens: ptr.To[int64](100)},
				"agent-invented-name": {InputTokens: ptr.To[int64](20), OutputTokens: ptr.To[int64](2)},
			}}}
	hist := func(vec *prometheus.HistogramVec, labels ...string) (uint64, float64) {
		h := &dto.Metric{}
		if err := vec.WithLabelValues(labels...).(prometheus.Histogram).Write(h); err != nil {
			t.Fatal(err)
		}
		return h.Histogram.GetSampleCount(), h.Histogram.GetSampleSum()
	}
	SetMetricsSemconv("")
	in := func(model string) []string {
		return []string{"invoke_agent", "anthropic", "input", "sonnet", model, "claude-code"}
	}
	n0, s0 := hist(genAI.tokens, in("claude-sonnet-5-5")...)
	o0, os0 := hist(genAI.tokens, in(telemetry.OtherModel)...)
	d0, ds0 := hist(genAI.duration, "invoke_agent", "anthropic", "sonnet", "claude-code", "timeout")
	recordGenAI(run, telemetry.NewModels())
	if n, s := hist(genAI.tokens, in("claude-sonnet-5-5")...); n != n0+1 || s-s0 != 110 {
		t.Errorf("sonnet input: %d observations, sum +%v; want one of the whole input 110", n-n0, s-s0)
	}
	if n, s := hist(genAI.tokens, in(telemetry.OtherModel)...); n != o0+1 || s-os0 != 20 {
		t.Errorf("an unknown model is not labelled other: %d, +%v", n-o0, s-os0)
	}
	if n, s := hist(genAI.duration, "invoke_agent", "anthropic", "sonnet", "claude-code", "timeout"); n != d0+1 || s-ds0 != 2.5 {
		t.Errorf("duration: %d, +%v", n-d0, s-ds0)
	}
}
