package controllers

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// Metrics are served by controller-runtime's metrics server, next to its
// own. Each run is counted once, when its end is written to status.
var (
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrun_runs_total",
		Help: "Runs ended, by runtime, end status and condition reason.",
	}, []string{"runtime", "status", "reason"})
	tokensTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrun_tokens_total",
		Help: "Tokens used by ended runs, by runtime, model and kind (input, output, cache_read, cache_write).",
	}, []string{"runtime", "model", "kind"})
	costTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrun_cost_usd_total",
		Help: "Cost in US dollars reported by the runtimes of ended runs, by runtime and model.",
	}, []string{"runtime", "model"})
)

func init() {
	metrics.Registry.MustRegister(runsTotal, tokensTotal, costTotal)
}

// recordEnd counts one ended run.
func recordEnd(run *v1alpha1.AgentRun, reason string) {
	rt := string(run.Spec.Runtime)
	st := run.Status
	runsTotal.WithLabelValues(rt, st.EndStatus, reason).Inc()
	if st.Usage == nil {
		return
	}
	// Whatever the by-model split lacks (it may be cut, or empty) is
	// counted under "unknown", so the per-model series add up to the
	// totals.
	rest := st.Usage.TokenCounts
	restCost, _ := strconv.ParseFloat(rest.CostUSD, 64)
	for model, c := range st.Usage.ByModel {
		addTokens(rt, model, c)
		rest.InputTokens = minus(rest.InputTokens, c.InputTokens)
		rest.OutputTokens = minus(rest.OutputTokens, c.OutputTokens)
		rest.CacheReadTokens = minus(rest.CacheReadTokens, c.CacheReadTokens)
		rest.CacheWriteTokens = minus(rest.CacheWriteTokens, c.CacheWriteTokens)
		if f, err := strconv.ParseFloat(c.CostUSD, 64); err == nil {
			restCost -= f
		}
	}
	rest.CostUSD = ""
	if restCost > 1e-12 {
		rest.CostUSD = strconv.FormatFloat(restCost, 'f', -1, 64)
	}
	addTokens(rt, "unknown", rest)
}

func addTokens(runtime, model string, c v1alpha1.TokenCounts) {
	for kind, v := range map[string]*int64{"input": c.InputTokens, "output": c.OutputTokens,
		"cache_read": c.CacheReadTokens, "cache_write": c.CacheWriteTokens} {
		if v != nil && *v > 0 {
			tokensTotal.WithLabelValues(runtime, model, kind).Add(float64(*v))
		}
	}
	if f, err := strconv.ParseFloat(c.CostUSD, 64); err == nil && f > 0 {
		costTotal.WithLabelValues(runtime, model).Add(f)
	}
}

func minus(a, b *int64) *int64 {
	if a == nil {
		return nil
	}
	v := *a
	if b != nil {
		v -= *b
	}
	return &v
}
