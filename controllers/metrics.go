package controllers

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/telemetry"
)

// Metrics are served by controller-runtime's metrics server, next to its
// own (docs/kubernetes/metrics.md). Tokens and cost are counted as they reach a
// run's status, live while it runs, so a scrape accounts for every dollar
// spent so far; a run's end is counted once, when it is written.
var (
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrun_runs_total",
		Help: "Runs ended, by namespace, runtime, end status and condition reason.",
	}, []string{"namespace", "runtime", "status", "reason"})
	tokensTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrun_tokens_total",
		Help: "Tokens used by runs so far (live while they run, the end's figures once they end), by namespace, runtime, model and kind (input, output, cache_read, cache_write).",
	}, []string{"namespace", "runtime", "model", "kind"})
	costTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrun_cost_usd_total",
		Help: "Cost in US dollars of runs so far, by namespace, runtime and model: the runtimes' own cost, else the estimate from the price table (never taken back when a runtime's own figure comes in lower).",
	}, []string{"namespace", "runtime", "model"})
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrun_run_duration_seconds",
		Help:    "Duration of ended runs (end.duration_ms), by runtime and end status.",
		Buckets: []float64{10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400},
	}, []string{"runtime", "status"})
	runsDesc = prometheus.NewDesc("agentrun_runs",
		"Runs in progress, by namespace and phase (Pending, Queued, Running).", []string{"namespace", "phase"}, nil)
	budgetTokensDesc = prometheus.NewDesc("agentrun_budget_spent_tokens",
		"Tokens an AgentBudget's window has spent.", []string{"namespace", "budget"}, nil)
	budgetCostDesc = prometheus.NewDesc("agentrun_budget_spent_cost_usd",
		"Cost in US dollars an AgentBudget's window has spent.", []string{"namespace", "budget"}, nil)
	budgetExhaustedDesc = prometheus.NewDesc("agentrun_budget_exhausted",
		"1 while an AgentBudget is spent, else 0.", []string{"namespace", "budget"}, nil)
)

// stateCollector reports the gauges from the manager's cache at scrape
// time: nothing to keep in step with restarts or deletions. Only the
// leader reports them (its reader is set once it leads): every replica has
// a cache, and the replicas' sum would count each run once per replica.
type stateCollector struct {
	reader atomic.Pointer[client.Reader]
}

var state = &stateCollector{}

func init() {
	metrics.Registry.MustRegister(runsTotal, tokensTotal, costTotal, runDuration, state)
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{runsDesc, budgetTokensDesc, budgetCostDesc, budgetExhaustedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	rp := c.reader.Load()
	if rp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The cache's own objects, not a copy of every run per scrape: they
	// are only read.
	runs := &v1alpha1.AgentRunList{}
	if err := (*rp).List(ctx, runs, client.UnsafeDisableDeepCopy); err == nil {
		counts := map[[2]string]int{}
		for i := range runs.Items {
			r := &runs.Items[i]
			if isTerminal(r.Status) {
				continue
			}
			phase := r.Status.Phase
			if phase == "" {
				phase = v1alpha1.PhasePending
			}
			counts[[2]string{r.Namespace, string(phase)}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
	budgets := &v1alpha1.AgentBudgetList{}
	if err := (*rp).List(ctx, budgets, client.UnsafeDisableDeepCopy); err == nil {
		for _, b := range budgets.Items {
			ch <- prometheus.MustNewConstMetric(budgetTokensDesc, prometheus.GaugeValue, float64(b.Status.Spent.Tokens), b.Namespace, b.Name)
			cost, _ := strconv.ParseFloat(b.Status.Spent.CostUSD, 64)
			ch <- prometheus.MustNewConstMetric(budgetCostDesc, prometheus.GaugeValue, cost, b.Namespace, b.Name)
			exhausted := 0.0
			if meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ConditionExhausted) {
				exhausted = 1
			}
			ch <- prometheus.MustNewConstMetric(budgetExhaustedDesc, prometheus.GaugeValue, exhausted, b.Namespace, b.Name)
		}
	}
}

// recordEnd counts one ended run.
func recordEnd(run *v1alpha1.AgentRun, reason string) {
	rt := string(run.Spec.Runtime)
	st := run.Status
	runsTotal.WithLabelValues(run.Namespace, rt, st.EndStatus, reason).Inc()
	if st.DurationMs != nil {
		runDuration.WithLabelValues(rt, st.EndStatus).Observe(float64(*st.DurationMs) / 1000)
	}
}

// maxModelLabels bounds the model label: the price table's models and the
// first models seen keep their names, the rest count as "other".
const maxModelLabels = 50

// spendCounter counts tokens and cost by the difference between what a
// run's status held and what it holds now, so each token is counted once
// however often the status is written. A run first seen by this process
// (a restart) is seeded with the status it already had, which an earlier
// process counted: nothing is counted twice, and Prometheus's rate()
// bridges the restart's counter reset. An entry goes when its run's end
// is counted, or with the run.
type spendCounter struct {
	mu     sync.Mutex
	runs   map[types.UID]*countedRun
	models map[string]bool
	// labels are the model labels of the GenAI metrics: the known models
	// (telemetry.Models, as the runners label them) and the price table's.
	labels telemetry.Models
}

type countedRun struct {
	namespace, runtime string
	byModel            map[string]counted
}

// counted is one model's counted usage of one run.
type counted struct {
	kinds [4]int64 // input, output, cache_read, cache_write
	cost  float64
}

var tokenKinds = [4]string{"input", "output", "cache_read", "cache_write"}

func newSpendCounter(models []string) *spendCounter {
	c := &spendCounter{runs: map[types.UID]*countedRun{}, models: map[string]bool{"unknown": true, "other": true},
		labels: telemetry.NewModels(models...)}
	for _, m := range models {
		if len(c.models) < maxModelLabels {
			c.models[m] = true
		}
	}
	return c
}

// account counts what the run's usage grew by from old to now.
func (c *spendCounter) account(run *v1alpha1.AgentRun, old, now *v1alpha1.Usage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr := c.runs[run.UID]
	if cr == nil {
		cr = &countedRun{namespace: run.Namespace, runtime: string(run.Spec.Runtime), byModel: splitUsage(old)}
		c.runs[run.UID] = cr
	}
	c.addLocked(cr, now)
	if isTerminal(run.Status) {
		delete(c.runs, run.UID)
	}
}

// deleted counts a deleted run's last live usage and forgets it. A run
// this process never saw is not counted: nothing is known of it.
func (c *spendCounter) deleted(uid types.UID, last *v1alpha1.Usage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr := c.runs[uid]
	if cr == nil {
		return
	}
	c.addLocked(cr, last)
	delete(c.runs, uid)
}

func (c *spendCounter) addLocked(cr *countedRun, u *v1alpha1.Usage) {
	for model, now := range splitUsage(u) {
		was := cr.byModel[model]
		label := c.modelLabel(model)
		for i, kind := range tokenKinds {
			if d := now.kinds[i] - was.kinds[i]; d > 0 {
				tokensTotal.WithLabelValues(cr.namespace, cr.runtime, label, kind).Add(float64(d))
				was.kinds[i] = now.kinds[i]
			}
		}
		if d := now.cost - was.cost; d > 1e-12 {
			costTotal.WithLabelValues(cr.namespace, cr.runtime, label).Add(d)
			was.cost = now.cost
		}
		cr.byModel[model] = was
	}
}

func (c *spendCounter) modelLabel(m string) string {
	if c.models[m] {
		return m
	}
	if len(c.models) < maxModelLabels {
		c.models[m] = true
		return m
	}
	return "other"
}

// splitUsage is a usage by model; what the by-model split lacks (it may be
// cut, or empty) is under "unknown", so the models add up to the totals.
func splitUsage(u *v1alpha1.Usage) map[string]counted {
	out := map[string]counted{}
	if u == nil {
		return out
	}
	rest := countedOf(u.TokenCounts)
	models := make([]string, 0, len(u.ByModel))
	for m := range u.ByModel {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		c := countedOf(u.ByModel[m])
		cur := out[m]
		for i := range c.kinds {
			cur.kinds[i] += c.kinds[i]
			rest.kinds[i] -= c.kinds[i]
		}
		cur.cost += c.cost
		rest.cost -= c.cost
		out[m] = cur
	}
	unknown := out["unknown"]
	for i := range rest.kinds {
		if rest.kinds[i] > 0 {
			unknown.kinds[i] += rest.kinds[i]
		}
	}
	if rest.cost > 1e-12 {
		unknown.cost += rest.cost
	}
	out["unknown"] = unknown
	return out
}

func countedOf(t v1alpha1.TokenCounts) counted {
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	c := counted{kinds: [4]int64{v(t.InputTokens), v(t.OutputTokens), v(t.CacheReadTokens), v(t.CacheWriteTokens)}}
	c.cost, _ = strconv.ParseFloat(t.CostUSD, 64)
	return c
}
