package controllers

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

func TestParsePrices(t *testing.T) {
	p, err := ParsePrices(`{"gpt-5.5": {"input": 1.25, "output": 10, "cacheRead": 0.125}, "gpt-5*": {"input": 2, "output": 20}, "gpt-*": {"input": 9}}`)
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]float64{"gpt-5.5": 1.25, "gpt-5-mini": 2, "gpt-4o": 9} {
		if pr, ok := p.lookup(model); !ok || pr.Input != want {
			t.Errorf("%s: %+v %v, want input %v", model, pr, ok, want)
		}
	}
	if _, ok := p.lookup("claude-sonnet-5-5"); ok {
		t.Error("a model without a price has one")
	}
	if m := p.Models(); len(m) != 1 || m[0] != "gpt-5.5" {
		t.Errorf("models %v", m)
	}
	for _, bad := range []string{`{"m": {"input": -1}}`, `{"m": {"inputs": 1}}`, `[1]`, `{"": {}}`} {
		if _, err := ParsePrices(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if p, err := ParsePrices(" "); err != nil || p != nil {
		t.Errorf("empty: %v %v", p, err)
	}
}

func TestEstimateCost(t *testing.T) {
	prices := Prices{"gpt-5.5": {Input: 1.25, Output: 10, CacheRead: 0.125}}
	i := func(v int64) *int64 { return &v }
	// codex: no cost anywhere; every model priced: the total is the sum,
	// both marked.
	u := &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: i(1000), OutputTokens: i(100), CacheReadTokens: i(10000)},
		ByModel: map[string]v1alpha1.TokenCounts{"gpt-5.5": {InputTokens: i(1000), OutputTokens: i(100), CacheReadTokens: i(10000)}}}
	estimateCost(u, prices)
	// 1000*1.25 + 100*10 + 10000*0.125 = 3500 per million.
	if u.CostUSD != "0.0035" || !u.CostEstimated || u.ByModel["gpt-5.5"].CostUSD != "0.0035" || !u.ByModel["gpt-5.5"].CostEstimated {
		t.Errorf("codex usage %+v", u)
	}
	// A runtime's own cost stays as it is.
	own := &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: i(10), CostUSD: "0.5"},
		ByModel: map[string]v1alpha1.TokenCounts{"gpt-5.5": {InputTokens: i(10), CostUSD: "0.5"}}}
	estimateCost(own, prices)
	if own.CostUSD != "0.5" || own.CostEstimated || own.ByModel["gpt-5.5"].CostEstimated {
		t.Errorf("reported cost changed: %+v", own)
	}
	// One model without a price: it keeps no cost, and so does the total.
	mixed := &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: i(20)},
		ByModel: map[string]v1alpha1.TokenCounts{"gpt-5.5": {InputTokens: i(10)}, "mystery": {InputTokens: i(10)}}}
	estimateCost(mixed, prices)
	if mixed.CostUSD != "" || mixed.ByModel["gpt-5.5"].CostUSD == "" || mixed.ByModel["mystery"].CostUSD != "" {
		t.Errorf("partly priced usage %+v", mixed)
	}
	// Sums of estimates read as decimals.
	if got := formatUSD(0.1 + 0.2); got != "0.3" {
		t.Errorf("formatUSD(0.1+0.2) = %s", got)
	}
}

func TestBudgetWindow(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	now := time.Date(2026, 3, 29, 12, 30, 0, 0, time.UTC) // a Sunday; Berlin is on summer time since 01:00 UTC
	tests := []struct {
		w          v1alpha1.BudgetWindow
		start, end time.Time
		bucket     time.Duration
	}{
		{v1alpha1.BudgetWindow{Rolling: "24h"}, now.Add(-24 * time.Hour), time.Time{}, time.Hour},
		{v1alpha1.BudgetWindow{Rolling: "2h"}, now.Add(-2 * time.Hour), time.Time{}, 5 * time.Minute},
		{v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay}, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC), time.Hour},
		// The day of a clock change has 23 hours in Berlin.
		{v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay, TimeZone: "Europe/Berlin"}, time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), time.Date(2026, 3, 30, 0, 0, 0, 0, berlin), time.Hour},
		{v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarWeek}, time.Date(2026, 3, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC), time.Hour},
		{v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarMonth, TimeZone: "Europe/Berlin"}, time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), time.Date(2026, 4, 1, 0, 0, 0, 0, berlin), time.Hour},
	}
	for _, tt := range tests {
		w, err := budgetWindow(tt.w, now)
		if err != nil {
			t.Errorf("%+v: %v", tt.w, err)
			continue
		}
		if !w.start.Equal(tt.start) || !w.end.Equal(tt.end) || w.bucket != tt.bucket {
			t.Errorf("%+v: window %s – %s by %s, want %s – %s by %s", tt.w, w.start, w.end, w.bucket, tt.start, tt.end, tt.bucket)
		}
	}
	if d := time.Date(2026, 3, 30, 0, 0, 0, 0, berlin).Sub(time.Date(2026, 3, 29, 0, 0, 0, 0, berlin)); d != 23*time.Hour {
		t.Errorf("the clock-change day lasts %s", d)
	}
	if _, err := budgetWindow(v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay, TimeZone: "Mars/Olympus"}, now); err == nil {
		t.Error("an unknown time zone was accepted")
	}
}

// budget is a test AgentBudget.
func budget(maxTokens int64, maxCost string, w v1alpha1.BudgetWindow) *v1alpha1.AgentBudget {
	b := &v1alpha1.AgentBudget{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "ns", Generation: 1},
		Spec: v1alpha1.AgentBudgetSpec{Window: w, MaxCostUSD: maxCost}}
	if maxTokens > 0 {
		b.Spec.MaxTokens = &maxTokens
	}
	return b
}

// spentRun is a run of namespace ns that started at start and spent
// tokens (input) at cost (empty: none reported), ended at end unless zero.
func spentRun(name string, tokens int64, cost string, start, end time.Time) v1alpha1.AgentRun {
	r := v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	r.Status.StartTime = &metav1.Time{Time: start}
	r.Status.Phase = v1alpha1.PhaseRunning
	r.Status.Usage = &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: &tokens, CostUSD: cost},
		ByModel: map[string]v1alpha1.TokenCounts{"m": {InputTokens: &tokens, CostUSD: cost}}}
	if !end.IsZero() {
		r.Status.CompletionTime = &metav1.Time{Time: end}
		r.Status.Phase = v1alpha1.PhaseSucceeded
	}
	return r
}

func exhausted(st v1alpha1.AgentBudgetStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionExhausted)
}

func TestComputeBudgetStatus(t *testing.T) {
	now := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	day := v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay}
	b := budget(1000, "2", day)
	runs := []v1alpha1.AgentRun{
		spentRun("big", 600, "0.75", now.Add(-2*time.Hour), now.Add(-time.Hour)),
		spentRun("running", 300, "0.5", now.Add(-time.Hour), time.Time{}),
		// Ended before today: not in this window.
		spentRun("yesterday", 5000, "9", now.Add(-20*time.Hour), now.Add(-16*time.Hour)),
		// Running since yesterday: counts, whole, today too.
		spentRun("overnight", 50, "0.01", now.Add(-20*time.Hour), time.Time{}),
	}
	other := spentRun("other-ns", 9999, "99", now.Add(-time.Hour), time.Time{})
	other.Namespace = "elsewhere"
	runs = append(runs, other)

	res := computeBudgetStatus(b, runs, nil, now)
	st := res.status
	if st.Spent.Tokens != 950 || st.Spent.CostUSD != "1.26" || st.RunCount != 3 {
		t.Errorf("spent %+v by %d runs", st.Spent, st.RunCount)
	}
	if c := exhausted(st); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonWithinBudget ||
		c.Message != "spent 950 of 1000 tokens and $1.26 of $2 in the window since 2026-06-10T00:00:00Z" {
		t.Errorf("condition %+v", c)
	}
	if len(st.Runs) != 3 || st.Runs[0].Name != "big" || st.Runs[2].Name != "overnight" || st.Runs[0].CostUSD != "0.75" {
		t.Errorf("runs %+v", st.Runs)
	}
	if !st.WindowStart.Time.Equal(time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC)) || !st.WindowEnd.Time.Equal(time.Date(2026, 6, 11, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("window %v – %v", st.WindowStart, st.WindowEnd)
	}
	if res.recheck != 9*time.Hour {
		t.Errorf("recheck in %s, want at the day's end", res.recheck)
	}

	// The running run's next model call passes the token cap.
	runs[1].Status.Usage.InputTokens = ptr.To[int64](400)
	b.Status = st
	st = computeBudgetStatus(b, runs, nil, now).status
	if c := exhausted(st); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonTokensSpent {
		t.Errorf("at 1050 of 1000 tokens: %+v", c)
	}

	// The cost cap alone: $1.26 reaches $1.26.
	bc := budget(0, "1.26", day)
	if c := exhausted(computeBudgetStatus(bc, runs, nil, now).status); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonCostSpent {
		t.Errorf("at $1.26 of $1.26: %+v", c)
	}
}

// TestBudgetCountsTheMeter: a run counts with the larger of what its CLI
// reported and what the proxy metered, so an agent cannot under-report its
// way past a cap.
func TestBudgetCountsTheMeter(t *testing.T) {
	now := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	r := spentRun("liar", 10, "", now.Add(-time.Minute), time.Time{})
	r.Status.Progress = &v1alpha1.Progress{MeteredTokens: ptr.To[int64](5000)}
	st := computeBudgetStatus(budget(1000, "", v1alpha1.BudgetWindow{Rolling: "1h"}), []v1alpha1.AgentRun{r}, nil, now).status
	if st.Spent.Tokens != 5000 || exhausted(st).Status != metav1.ConditionTrue {
		t.Errorf("spent %+v, condition %+v", st.Spent, exhausted(st))
	}
}

// TestBudgetUnpriced: tokens without a cost or a price are out of the cost,
// and the status says so; priced estimates are marked.
func TestBudgetUnpriced(t *testing.T) {
	now := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	codex := spentRun("codex", 700, "", now.Add(-time.Minute), time.Time{})
	priced := spentRun("priced", 100, "0.2", now.Add(-time.Minute), time.Time{})
	priced.Status.Usage.CostEstimated = true
	st := computeBudgetStatus(budget(0, "1", v1alpha1.BudgetWindow{Rolling: "1h"}), []v1alpha1.AgentRun{codex, priced}, nil, now).status
	if st.Spent.UnpricedTokens != 700 || len(st.Spent.UnpricedModels) != 1 || st.Spent.UnpricedModels[0] != "m" ||
		st.Spent.CostUSD != "0.2" || !st.Spent.CostEstimated {
		t.Errorf("spent %+v", st.Spent)
	}
	c := exhausted(st)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "700 tokens of m have no cost or price") ||
		!strings.Contains(c.Message, "estimated in part") || !strings.Contains(c.Message, "set their prices") {
		t.Errorf("condition %+v", c)
	}
}

// TestBudgetKeepsDeletedRuns: a deleted run's spend stays in its group
// while the group's end is in the window, groups stay bounded, and a
// rolling window gives the spend back when it moves past it.
func TestBudgetKeepsDeletedRuns(t *testing.T) {
	now := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	b := budget(1000, "", v1alpha1.BudgetWindow{Rolling: "24h"})
	del := []deletedRun{
		{uid: "a", spend: runSpend{tokens: 400}, until: now.Add(-30 * time.Minute)},
		{uid: "b", spend: runSpend{tokens: 300}, until: now.Add(-20 * time.Minute)},
		{uid: "c", spend: runSpend{tokens: 400}, until: now.Add(-5 * time.Hour)},
		{uid: "old", spend: runSpend{tokens: 9999}, until: now.Add(-25 * time.Hour)},
	}
	res := computeBudgetStatus(b, nil, del, now)
	st := res.status
	if st.Spent.Tokens != 1100 || st.RunCount != 3 || len(st.Deleted) != 2 || exhausted(st).Status != metav1.ConditionTrue {
		t.Errorf("spent %+v by %d runs, groups %+v", st.Spent, st.RunCount, st.Deleted)
	}
	// The oldest group leaves the window 19 h from now.
	if res.recheck != 19*time.Hour {
		t.Errorf("recheck in %s", res.recheck)
	}
	// Later: the status alone carries the groups (the manager may have
	// restarted), and the window has moved past the older one.
	b.Status = st
	st = computeBudgetStatus(b, nil, nil, now.Add(19*time.Hour+time.Second)).status
	if st.Spent.Tokens != 700 || st.RunCount != 2 || exhausted(st).Status != metav1.ConditionFalse {
		t.Errorf("after the window moved: %+v by %d runs", st.Spent, st.RunCount)
	}
	// Many groups are merged, the oldest first, never losing spend.
	var many []deletedRun
	for i := range 80 {
		many = append(many, deletedRun{uid: types.UID(rune('a' + i)), spend: runSpend{tokens: 1}, until: now.Add(-time.Duration(i) * 10 * time.Minute)})
	}
	st = computeBudgetStatus(budget(1000, "", v1alpha1.BudgetWindow{Rolling: "24h"}), nil, many, now).status
	if len(st.Deleted) > maxDeletedGroups || st.Spent.Tokens != 80 || st.RunCount != 80 {
		t.Errorf("%d groups, %d tokens, %d runs", len(st.Deleted), st.Spent.Tokens, st.RunCount)
	}
}

func TestBudgetInvalidTimeZoneFailsClosed(t *testing.T) {
	now := time.Now()
	st := computeBudgetStatus(budget(10, "", v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay, TimeZone: "Nowhere/Else"}), nil, nil, now).status
	if c := exhausted(st); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidWindow || !strings.Contains(c.Message, "Nowhere/Else") {
		t.Errorf("condition %+v", c)
	}
}

// TestBudgetInvalidSelectorFailsClosed: a selector that does not parse
// makes the budget Exhausted (InvalidSelector) and keeps what it had
// counted, instead of covering nothing.
func TestBudgetInvalidSelectorFailsClosed(t *testing.T) {
	now := time.Now()
	b := budget(10, "", v1alpha1.BudgetWindow{Rolling: "1h"})
	b.Spec.Selector = &v1alpha1.BudgetSelector{MatchExpressions: []v1alpha1.BudgetSelectorRequirement{{Key: "team", Operator: "Equals", Values: []v1alpha1.LabelValue{"a"}}}}
	b.Status.Spent, b.Status.RunCount = v1alpha1.BudgetSpend{Tokens: 7}, 1
	st := computeBudgetStatus(b, nil, nil, now).status
	if c := exhausted(st); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidSelector || !strings.Contains(c.Message, `"Equals" is not a valid label selector operator`) {
		t.Errorf("condition %+v", c)
	}
	if st.Spent.Tokens != 7 || st.RunCount != 1 {
		t.Errorf("spent %+v runs %d: want what was counted kept", st.Spent, st.RunCount)
	}
}

func TestBudgetSelector(t *testing.T) {
	b := budget(10, "", v1alpha1.BudgetWindow{Rolling: "1h"})
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{"team": "a"}}}
	if !b.Covers(run) {
		t.Error("a budget without a selector does not cover its namespace")
	}
	b.Spec.Selector = &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"team": "b"}}
	if b.Covers(run) {
		t.Error("the selector team=b covers a team=a run")
	}
	run.Labels["team"] = "b"
	if !b.Covers(run) {
		t.Error("the selector team=b does not cover a team=b run")
	}
	run.Namespace = "other"
	if b.Covers(run) {
		t.Error("a budget covers another namespace's run")
	}
}

// TestRefineOutcome: a Pod deleted under a running agent ends the run
// BudgetExceeded when the manager stopped it for a budget, Preempted when
// a queue suspended its Job, PodDeleted otherwise.
func TestRefineOutcome(t *testing.T) {
	deleted := func(annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations, DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
	}
	interrupted := func() *outcome {
		return &outcome{EndStatus: events.StatusInterrupted, Reason: v1alpha1.ReasonPodDeleted, Detail: "the Pod was deleted at X and its agent was stopped"}
	}
	stop := map[string]string{AnnotationStopReason: v1alpha1.ReasonBudgetExceeded, AnnotationStopMessage: "AgentBudget team is spent: spent 10 of 5 tokens"}
	oc := refineOutcome(observation{Pod: deleted(stop)}, interrupted())
	if oc.Reason != v1alpha1.ReasonBudgetExceeded || oc.Detail != "stopped: AgentBudget team is spent: spent 10 of 5 tokens; usage and result are what it had reached" {
		t.Errorf("budget stop: %+v", oc)
	}
	noSummary := &outcome{EndStatus: events.StatusFailed, Reason: v1alpha1.ReasonPodDeleted, Detail: "its agent never reported an end"}
	if oc := refineOutcome(observation{Pod: deleted(stop)}, noSummary); oc.Reason != v1alpha1.ReasonBudgetExceeded || !strings.HasSuffix(oc.Detail, "; its agent never reported an end") {
		t.Errorf("budget stop without a summary: %+v", oc)
	}
	suspended := &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}
	if oc := refineOutcome(observation{Pod: deleted(nil), Job: suspended}, interrupted()); oc.Reason != v1alpha1.ReasonPreempted || !strings.Contains(oc.Detail, "suspended by its queue") {
		t.Errorf("preempted: %+v", oc)
	}
	byCondition := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}}}
	if oc := refineOutcome(observation{Pod: deleted(nil), Job: byCondition}, interrupted()); oc.Reason != v1alpha1.ReasonPreempted {
		t.Errorf("preempted (Suspended condition): %+v", oc)
	}
	if oc := refineOutcome(observation{Pod: deleted(nil), Job: &batchv1.Job{}}, interrupted()); oc.Reason != v1alpha1.ReasonPodDeleted {
		t.Errorf("a plain delete: %+v", oc)
	}
	// Other outcomes are left alone: a cancel stays Cancelled.
	cancelled := &outcome{EndStatus: events.StatusInterrupted, Reason: v1alpha1.ReasonCancelled}
	if oc := refineOutcome(observation{Pod: deleted(stop), Job: suspended}, cancelled); oc.Reason != v1alpha1.ReasonCancelled {
		t.Errorf("cancel: %+v", oc)
	}
	if refineOutcome(observation{}, nil) != nil {
		t.Error("no outcome became one")
	}
}

func TestApplyHold(t *testing.T) {
	now := time.Now()
	st := computeStatus(v1alpha1.AgentRunStatus{}, 1, observation{Now: now}, nil)
	held := applyHold(st, hold{Reason: v1alpha1.ReasonBudgetExhausted, Message: "AgentBudget team is spent"}, 1, now)
	if held.Phase != v1alpha1.PhaseQueued {
		t.Errorf("phase %s", held.Phase)
	}
	for _, c := range held.Conditions {
		if c.Reason != v1alpha1.ReasonBudgetExhausted || c.ObservedGeneration != 1 {
			t.Errorf("condition %+v", c)
		}
	}
	if c := meta.FindStatusCondition(held.Conditions, v1alpha1.ConditionRunning); c.Status != metav1.ConditionFalse || c.Message != "AgentBudget team is spent" {
		t.Errorf("Running %+v", c)
	}
	if ev := computeEvents(st, held); len(ev) != 1 || ev[0].Reason != v1alpha1.ReasonBudgetExhausted || ev[0].Message != "AgentBudget team is spent" {
		t.Errorf("events %+v", ev)
	}
	// A run with a Job is not held.
	st.JobName = "j"
	if applyHold(st, hold{Reason: v1alpha1.ReasonBudgetExhausted}, 1, now).Phase != st.Phase {
		t.Error("a run with a Job was held")
	}
}

func TestApplyLive(t *testing.T) {
	doc := &progress.Doc{V: 1, Boot: "b", Version: 3, ModelCalls: 2, ToolCalls: 5,
		Activity:  "[main] tool Bash: " + strings.Repeat("é", 200),
		LastEvent: "2026-06-10T15:00:01.250Z", Meter: &progress.Meter{Calls: 2, InputTokens: 70, OutputTokens: 30}}
	doc.Usage = events.NewTotals()
	doc.Usage.AddModel("gpt-6", events.TokenCounts{InputTokens: events.Int64(50), OutputTokens: events.Int64(20)})
	doc.Counters.Tools, doc.Counters.DeniedConnections = 4, 1
	st := applyLive(v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}, doc)
	if *st.Usage.TotalTokens != 70 || *st.Usage.ByModel["gpt-6"].InputTokens != 50 {
		t.Errorf("usage %+v", st.Usage)
	}
	if st.Counters.Tools != 4 || st.Counters.DeniedConnections != 1 {
		t.Errorf("counters %+v", st.Counters)
	}
	p := st.Progress
	if p.ModelCalls != 2 || p.ToolCalls != 5 || *p.MeteredTokens != 100 || len(p.Activity) > maxActivityBytes ||
		!p.LastEventTime.Time.Equal(time.Date(2026, 6, 10, 15, 0, 1, 0, time.UTC)) {
		t.Errorf("progress %+v", p)
	}
	if p.UnmeteredCalls != nil {
		t.Errorf("unmeteredCalls %d without unmetered calls", *p.UnmeteredCalls)
	}
	doc.Meter.Unmetered = 3
	if p := applyLive(v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}, doc).Progress; p.UnmeteredCalls == nil || *p.UnmeteredCalls != 3 {
		t.Errorf("unmeteredCalls %v, want 3", p.UnmeteredCalls)
	}
}

// TestBudgetViewChanged: a run's change reaches the budgets only when it
// can change what they count of it.
func TestBudgetViewChanged(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(now.Add(time.Minute))
	started := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{"team": "a"}},
		Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StartTime: &now,
			Usage: &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: ptr.To[int64](10)}}}}
	pending := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"team": "a"}},
		Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending}}
	for _, tc := range []struct {
		name string
		old  *v1alpha1.AgentRun
		edit func(*v1alpha1.AgentRun)
		want bool
	}{
		{"a condition only", started, func(r *v1alpha1.AgentRun) {
			r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Running"}}
		}, false},
		{"live progress without new usage", started, func(r *v1alpha1.AgentRun) {
			r.Status.Progress = &v1alpha1.Progress{ToolCalls: 3, Activity: "reading"}
		}, false},
		{"new usage", started, func(r *v1alpha1.AgentRun) { r.Status.Usage.InputTokens = ptr.To[int64](20) }, true},
		{"metered tokens", started, func(r *v1alpha1.AgentRun) { r.Status.Progress = &v1alpha1.Progress{MeteredTokens: ptr.To[int64](99)} }, true},
		{"the end", started, func(r *v1alpha1.AgentRun) { r.Status.CompletionTime, r.Status.Phase = &later, v1alpha1.PhaseSucceeded }, true},
		{"relabelled", started, func(r *v1alpha1.AgentRun) { r.Labels = map[string]string{"team": "b"} }, true},
		{"the phase of a counted run", started, func(r *v1alpha1.AgentRun) { r.Status.Phase = v1alpha1.PhaseFailed }, true},
		{"not started: phase and labels", pending, func(r *v1alpha1.AgentRun) {
			r.Status.Phase, r.Status.JobName, r.Labels = v1alpha1.PhaseQueued, "p", map[string]string{"team": "b"}
		}, false},
		{"starts", pending, func(r *v1alpha1.AgentRun) { r.Status.StartTime = &later }, true},
	} {
		run := tc.old.DeepCopy()
		tc.edit(run)
		if got := budgetViewChanged(tc.old, run); got != tc.want {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.want)
		}
	}
}
