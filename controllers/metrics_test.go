package controllers

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

func TestRecordEnd(t *testing.T) {
	run := newRun("m", nil)
	run.Spec.Runtime = v1alpha1.RuntimeCodex
	run.Status = v1alpha1.AgentRunStatus{EndStatus: "finished", DurationMs: ptr.To[int64](90_000)}
	runs := func() float64 {
		return testutil.ToFloat64(runsTotal.WithLabelValues(run.Namespace, "codex", "finished", "Finished"))
	}
	hist := func() (uint64, float64) {
		h := &dto.Metric{}
		if err := runDuration.WithLabelValues("codex", "finished").(prometheus.Histogram).Write(h); err != nil {
			t.Fatal(err)
		}
		return h.Histogram.GetSampleCount(), h.Histogram.GetSampleSum()
	}
	before := runs()
	n0, sum0 := hist()
	recordEnd(run, "Finished")
	// Counters are global: compare what this run added.
	if d := runs() - before; d != 1 {
		t.Errorf("runs counted %v, want 1", d)
	}
	if n, sum := hist(); n != n0+1 || sum-sum0 != 90 {
		t.Errorf("duration histogram: %d observations (%d before), sum grew by %v; want one of 90 s", n, n0, sum-sum0)
	}
}

// usage builds a status usage: total input and cost, and per model input
// and cost.
func usage(input int64, cost string, models map[string][2]string) *v1alpha1.Usage {
	u := &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: ptr.To(input), CostUSD: cost}}
	if models != nil {
		u.ByModel = map[string]v1alpha1.TokenCounts{}
		for m, v := range models {
			var n int64
			if _, err := fmt.Sscan(v[0], &n); err != nil {
				panic(fmt.Sprintf("usage fixture %q: %v", v[0], err))
			}
			u.ByModel[m] = v1alpha1.TokenCounts{InputTokens: ptr.To(n), CostUSD: v[1]}
		}
	}
	return u
}

// spendMetrics reads the counters of one namespace, runtime and model.
func spendMetrics(ns, model string) (float64, float64) {
	return testutil.ToFloat64(tokensTotal.WithLabelValues(ns, "codex", model, "input")),
		testutil.ToFloat64(costTotal.WithLabelValues(ns, "codex", model))
}

// TestSpendCounter: tokens and cost are counted by what status grew by,
// each once: live writes, the end, a restart that seeds from status, and a
// deleted run's last live usage.
func TestSpendCounter(t *testing.T) {
	const ns = "spend-counter"
	c := newSpendCounter(nil)
	run := newRun("r", nil)
	run.Namespace, run.UID, run.Spec.Runtime = ns, types.UID("uid-1"), v1alpha1.RuntimeCodex
	run.Status.Phase = v1alpha1.PhaseRunning

	step := func(old, now *v1alpha1.Usage, wantTokens, wantCost float64) {
		t.Helper()
		t0, c0 := spendMetrics(ns, "gpt-6")
		c.account(run, old, now)
		t1, c1 := spendMetrics(ns, "gpt-6")
		if t1-t0 != wantTokens || fmt.Sprintf("%.6f", c1-c0) != fmt.Sprintf("%.6f", wantCost) {
			t.Errorf("counted %v tokens and $%v, want %v and $%v", t1-t0, c1-c0, wantTokens, wantCost)
		}
	}
	// First seen with no usage: the live writes count what they add.
	step(nil, usage(100, "0.1", map[string][2]string{"gpt-6": {"100", "0.1"}}), 100, 0.1)
	step(usage(100, "0.1", map[string][2]string{"gpt-6": {"100", "0.1"}}), usage(250, "0.25", map[string][2]string{"gpt-6": {"250", "0.25"}}), 150, 0.15)
	// A write that changes nothing counts nothing.
	step(usage(250, "0.25", map[string][2]string{"gpt-6": {"250", "0.25"}}), usage(250, "0.25", map[string][2]string{"gpt-6": {"250", "0.25"}}), 0, 0)

	// A restart: a new counter sees the run with the status an earlier
	// process counted, and counts only what comes after.
	c = newSpendCounter(nil)
	step(usage(250, "0.25", map[string][2]string{"gpt-6": {"250", "0.25"}}), usage(300, "0.3", map[string][2]string{"gpt-6": {"300", "0.3"}}), 50, 0.05)

	// The end replaces the live figures: an estimate above the runtime's
	// own cost is not taken back; more tokens are counted.
	run.Status.Phase = v1alpha1.PhaseSucceeded
	step(usage(300, "0.3", map[string][2]string{"gpt-6": {"300", "0.3"}}), usage(320, "0.29", map[string][2]string{"gpt-6": {"320", "0.29"}}), 20, 0)
	if len(c.runs) != 0 {
		t.Errorf("an ended run is still held: %v", c.runs)
	}

	// A run deleted mid-flight: its last live usage is counted once.
	del := newRun("d", nil)
	del.Namespace, del.UID, del.Spec.Runtime = ns, types.UID("uid-2"), v1alpha1.RuntimeCodex
	del.Status.Phase = v1alpha1.PhaseRunning
	c.account(del, nil, usage(10, "", map[string][2]string{"gpt-6": {"10", ""}}))
	t0, _ := spendMetrics(ns, "gpt-6")
	c.deleted(del.UID, usage(40, "", map[string][2]string{"gpt-6": {"40", ""}}))
	c.deleted(del.UID, usage(90, "", map[string][2]string{"gpt-6": {"90", ""}}))
	if t1, _ := spendMetrics(ns, "gpt-6"); t1-t0 != 30 {
		t.Errorf("a deleted run's last live usage counted %v tokens, want 30, once", t1-t0)
	}
}

// TestSpendCounterSplitsByModel: what the by-model split lacks counts
// under "unknown", so the models add up to the total.
func TestSpendCounterSplitsByModel(t *testing.T) {
	const ns = "spend-split"
	c := newSpendCounter(nil)
	run := newRun("r", nil)
	run.Namespace, run.UID, run.Spec.Runtime = ns, types.UID("uid-split"), v1alpha1.RuntimeCodex
	// Counters are global (and tests may run more than once): compare
	// what this run added.
	gt, gc := spendMetrics(ns, "gpt-6")
	ut, uc := spendMetrics(ns, "unknown")
	c.account(run, nil, usage(100, "0.5", map[string][2]string{"gpt-6": {"60", "0.25"}}))
	if tok, cost := spendMetrics(ns, "gpt-6"); tok-gt != 60 || cost-gc != 0.25 {
		t.Errorf("gpt-6: %v tokens $%v", tok-gt, cost-gc)
	}
	if tok, cost := spendMetrics(ns, "unknown"); tok-ut != 40 || cost-uc != 0.25 {
		t.Errorf("the rest under unknown: %v tokens $%v", tok-ut, cost-uc)
	}
}

// TestModelLabelIsBounded: past maxModelLabels names, models count as
// "other"; the price table's models always keep their names.
func TestModelLabelIsBounded(t *testing.T) {
	c := newSpendCounter([]string{"priced-model"})
	for i := range 2 * maxModelLabels {
		c.modelLabel(fmt.Sprintf("model-%d", i))
	}
	if len(c.models) > maxModelLabels {
		t.Errorf("%d model labels, at most %d", len(c.models), maxModelLabels)
	}
	if got := c.modelLabel("yet-another"); got != "other" {
		t.Errorf("a model past the bound is %q, want other", got)
	}
	if got := c.modelLabel("priced-model"); got != "priced-model" {
		t.Errorf("a priced model is %q", got)
	}
}
