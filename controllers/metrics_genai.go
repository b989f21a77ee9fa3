package controllers

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/telemetry"
)

// The GenAI metrics of the runs (docs/telemetry.md, "Metrics"), under the
// names and labels a collector's Prometheus exporter gives the runners'
// OTLP metrics of the same operation (invoke_agent: one run), so that a
// dashboard reads the manager's /metrics or the collector alike:
// gen_ai.client.token.usage is gen_ai_client_token_usage,
// gen_ai.client.operation.duration (in s) is
// gen_ai_client_operation_duration_seconds, and an attribute's dots are
// underscores. The runners also export the per-call (chat) points, which
// only they see.
var genAI struct {
	once     sync.Once
	conv     telemetry.Semconv
	tokens   *prometheus.HistogramVec
	duration *prometheus.HistogramVec
}

// promLabel is an attribute key as a Prometheus label.
func promLabel(key string) string { return strings.ReplaceAll(key, ".", "_") }

// SetMetricsSemconv picks the GenAI conventions' version of the labels
// (OTEL_SEMCONV_STABILITY_OPT_IN, as the runners get it); before the first
// run ends only.
func SetMetricsSemconv(optIn string) {
	genAI.once.Do(func() { registerGenAI(optIn) })
}

func registerGenAI(optIn string) {
	genAI.conv = telemetry.SemconvV1_36
	for _, p := range strings.Split(optIn, ",") {
		if strings.TrimSpace(p) == telemetry.OptInLatest {
			genAI.conv = telemetry.SemconvLatest
		}
	}
	provider := promLabel(genAI.conv.ProviderKey())
	genAI.tokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_token_usage",
		Help:    "Number of input and output tokens used, per ended run and model (gen_ai.client.token.usage, operation invoke_agent).",
		Buckets: telemetry.TokenUsageBuckets,
	}, []string{"gen_ai_operation_name", provider, "gen_ai_token_type", "gen_ai_request_model", "gen_ai_response_model", "agentrun_runtime"})
	genAI.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_duration_seconds",
		Help:    "Duration of ended runs (gen_ai.client.operation.duration, operation invoke_agent).",
		Buckets: telemetry.DurationBuckets,
	}, []string{"gen_ai_operation_name", provider, "gen_ai_request_model", "agentrun_runtime", "error_type"})
	metrics.Registry.MustRegister(genAI.tokens, genAI.duration)
}

// recordGenAI observes one ended run: its input (with the cache) and
// output tokens per model, and its duration. Model labels are the known
// models and the price table's, else "other" (a usage's model is the
// agent's to write).
func recordGenAI(run *v1alpha1.AgentRun, models telemetry.Models) {
	SetMetricsSemconv("")
	rt := string(run.Spec.Runtime)
	st := run.Status
	provider := telemetry.ProviderOf(rt)
	request := ""
	if run.Spec.Model != "" {
		request = models.Label(run.Spec.Model)
	}
	if u := st.Usage; u != nil {
		for model, c := range splitUsage(u) {
			in := c.kinds[0] + c.kinds[2] + c.kinds[3]
			if model == events.UnknownModel && in == 0 && c.kinds[1] == 0 {
				continue // the split's remainder, empty
			}
			label := models.Label(model)
			genAI.tokens.WithLabelValues("invoke_agent", provider, telemetry.TokenInput, request, label, rt).Observe(float64(in))
			genAI.tokens.WithLabelValues("invoke_agent", provider, telemetry.TokenOutput, request, label, rt).Observe(float64(c.kinds[1]))
		}
	}
	if st.DurationMs != nil {
		errType := ""
		if st.EndStatus != events.StatusFinished {
			errType = st.EndStatus
		}
		genAI.duration.WithLabelValues("invoke_agent", provider, request, rt, errType).Observe(float64(*st.DurationMs) / 1000)
	}
}
