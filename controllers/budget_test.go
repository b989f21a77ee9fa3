package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// User stories of AgentBudgets against a real API server: new runs wait
// while a budget is spent and start when its window moves on; running runs
// are stopped when live usage spends it; codex's usage is priced from the
// table; deleted runs stay counted.

func (h *harness) createBudget(name string, spec v1alpha1.AgentBudgetSpec) *v1alpha1.AgentBudget {
	h.t.Helper()
	b := &v1alpha1.AgentBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns}, Spec: spec}
	if err := h.c.Create(h.ctx, b); err != nil {
		h.t.Fatalf("create AgentBudget %s: %v", name, err)
	}
	return b
}

func (h *harness) getBudget(name string) *v1alpha1.AgentBudget {
	h.t.Helper()
	b := &v1alpha1.AgentBudget{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// budgetIs waits until the budget's Exhausted condition has status want.
func (h *harness) budgetIs(name string, want metav1.ConditionStatus) *v1alpha1.AgentBudget {
	h.t.Helper()
	var b *v1alpha1.AgentBudget
	h.eventually(fmt.Sprintf("AgentBudget %s Exhausted=%s", name, want), func() string {
		b = h.getBudget(name)
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionExhausted)
		if c == nil || c.Status != want {
			return fmt.Sprintf("status %+v", b.Status)
		}
		return ""
	})
	return b
}

// endWith is an end summary with the given token total and no cost (codex).
func endWith(status string, input int64, model string) string {
	e := &events.End{Status: status, ExitCode: ptr.To(0), DurationMs: 1000, Usage: events.NewTotals()}
	e.Usage.AddModel(model, events.TokenCounts{InputTokens: &input})
	if status == events.StatusInterrupted {
		e.ExitCode = nil
	}
	return string(podcontract.FromEnd(e, aggregator.Counters{}).Encode())
}

// finishedRun runs a run to its end with input tokens of model.
func (h *harness) finishedRun(name string, input int64, model string, edit func(*v1alpha1.AgentRunSpec)) {
	h.t.Helper()
	h.createRun(name, edit)
	pod := h.startPod(h.job(name))
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs(name, v1alpha1.PhaseRunning)
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", endWith(events.StatusFinished, input, model), true))
	h.phaseIs(name, v1alpha1.PhaseSucceeded)
}

// TestBudgetHoldsNewRunsUntilTheWindowMoves: while a budget is spent, a
// new run it covers stays Queued without a Job, with reason
// BudgetExhausted and a message naming the budget; when the window has
// moved past the spend, it gets its Job.
func TestBudgetHoldsNewRunsUntilTheWindowMoves(t *testing.T) {
	h := newHarness(t)
	h.createBudget("team-hourly", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "1h"}, MaxTokens: ptr.To[int64](1000)})
	h.finishedRun("first", 1500, "claude-sonnet-5-5", nil)
	b := h.budgetIs("team-hourly", metav1.ConditionTrue)
	if b.Status.Spent.Tokens != 1500 || b.Status.RunCount != 1 || len(b.Status.Runs) != 1 || b.Status.Runs[0].Name != "first" {
		t.Errorf("budget status %+v", b.Status)
	}

	h.createRun("second", nil)
	run := h.phaseIs("second", v1alpha1.PhaseQueued)
	c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionRunning)
	if c.Reason != v1alpha1.ReasonBudgetExhausted || !strings.Contains(c.Message, "AgentBudget team-hourly is spent: spent 1500 of 1000 tokens in the last 1h") {
		t.Errorf("Running condition %+v", c)
	}
	if s := succeeded(run); s.Status != metav1.ConditionUnknown || s.Reason != v1alpha1.ReasonBudgetExhausted {
		t.Errorf("Succeeded condition %+v", s)
	}
	h.consistently("no Job while the budget is spent", time.Second, func() string {
		if n := h.jobCount(); n != 1 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
	h.waitEvent("second", "Normal/BudgetExhausted: AgentBudget team-hourly is spent")

	// An hour on, the first run has left the window. The budget's own
	// requeue is computed for that moment (TestBudgetKeepsDeletedRuns);
	// here a touch of the budget brings its reconcile on the injected
	// clock.
	h.clock.Step(time.Hour + time.Minute)
	b = h.getBudget("team-hourly")
	h.modify(b, false, func() { b.Annotations = map[string]string{"poke": "1"} })
	h.budgetIs("team-hourly", metav1.ConditionFalse)
	h.job("second")
	h.phaseIs("second", v1alpha1.PhasePending)
}

// TestBudgetStopsRunningRuns: when live usage spends a budget, the running
// runs it covers are stopped as by a cancel (their Pods are deleted, the
// runner's SIGINT keeps their usage and result) and end with reason
// BudgetExceeded, naming the budget; a run the budget does not cover goes
// on.
func TestBudgetStopsRunningRuns(t *testing.T) {
	h := newHarness(t)
	h.createBudget("team-a", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay, TimeZone: "Europe/Berlin"},
		MaxTokens: ptr.To[int64](1000), Selector: &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"team": "a"}}})
	teamA := func(team string) func(*v1alpha1.AgentRunSpec) {
		return func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{Labels: map[string]string{"team": team}}
		}
	}
	podA1, scA1 := h.liveRunLabelled("a1", "127.0.0.1", map[string]string{"team": "a"}, teamA("a"))
	podA2, scA2 := h.liveRunLabelled("a2", "127.0.0.2", map[string]string{"team": "a"}, teamA("a"))
	podB, scB := h.liveRunLabelled("b1", "127.0.0.3", map[string]string{"team": "b"}, teamA("b"))

	scA1.line(usageLine("m", 600, 0, ""))
	h.usageIs("a1", 600)
	scB.line(usageLine("m", 5000, 0, ""))
	h.usageIs("b1", 5000)
	h.budgetIs("team-a", metav1.ConditionFalse)
	// a2's first call pushes team a past its cap.
	scA2.line(usageLine("m", 500, 0, ""))
	b := h.budgetIs("team-a", metav1.ConditionTrue)
	if b.Status.Spent.Tokens != 1100 || b.Status.RunCount != 2 {
		t.Errorf("budget %+v", b.Status)
	}

	for _, pod := range []*corev1.Pod{podA1, podA2} {
		h.eventually("Pod "+pod.Name+" deleted to stop its agent", func() string {
			p, ok := h.podExists(pod)
			if !ok || p.DeletionTimestamp == nil {
				return "not deleted"
			}
			if p.Annotations[AnnotationStopReason] != v1alpha1.ReasonBudgetExceeded || !strings.HasPrefix(p.Annotations[AnnotationStopMessage], "AgentBudget team-a is spent") {
				return fmt.Sprintf("annotations %v", p.Annotations)
			}
			return ""
		})
		// The runner ends the agent as interrupted and writes its
		// summary, with the usage it had.
		h.setStatus(pod, agentExited(h.clock.Now(), 130, "Error", endWith(events.StatusInterrupted, 600, "m"), true))
	}
	for _, name := range []string{"a1", "a2"} {
		run := h.phaseIs(name, v1alpha1.PhaseFailed)
		c := succeeded(run)
		if run.Status.EndStatus != events.StatusInterrupted || c.Reason != v1alpha1.ReasonBudgetExceeded ||
			!strings.Contains(run.Status.Detail, "AgentBudget team-a is spent") || *run.Status.Usage.TotalTokens != 600 {
			t.Errorf("%s: endStatus %s reason %s detail %q usage %+v", name, run.Status.EndStatus, c.Reason, run.Status.Detail, run.Status.Usage)
		}
		h.waitEvent(name, "Warning/BudgetExceeded: AgentBudget team-a is spent")
	}
	// Team b's run is not covered: it goes on.
	if p, _ := h.podExists(podB); p.DeletionTimestamp != nil {
		t.Error("the run of another team was stopped")
	}
	if run := h.get("b1"); run.Status.Phase != v1alpha1.PhaseRunning {
		t.Errorf("b1 %s", run.Status.Phase)
	}
}

// liveRunLabelled is liveRun for a run with labels.
func (h *harness) liveRunLabelled(name, ip string, labels map[string]string, edit func(*v1alpha1.AgentRunSpec)) (*corev1.Pod, *sidecar) {
	h.t.Helper()
	sc := h.serveProgress(ip)
	sc.line(startLine)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns, Labels: labels},
		Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Prompt: v1alpha1.PromptSource{Text: ptr.To("say hi")}}}
	if edit != nil {
		edit(&run.Spec)
	}
	if err := h.c.Create(h.ctx, run); err != nil {
		h.t.Fatal(err)
	}
	pod := h.startPod(h.job(name))
	h.setStatus(pod, runningAt(h.clock.Now(), ip))
	h.phaseIs(name, v1alpha1.PhaseRunning)
	return pod, sc
}

// TestBudgetPricesCodex: codex reports no cost; the admin's price table
// gives an estimate, marked so in the run's and the budget's status, and
// the cost cap acts on it. A model without a price leaves the cap to
// tokens, and the budget says so.
func TestBudgetPricesCodex(t *testing.T) {
	h := newHarness(t)
	h.stopController()
	h.prices = Prices{"gpt-5.5": {Input: 1.25, Output: 10}}
	h.start()
	h.createBudget("codex-cost", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "24h"}, MaxCostUSD: "0.01"})
	codex := func(s *v1alpha1.AgentRunSpec) { s.Runtime, s.Model = v1alpha1.RuntimeCodex, "gpt-5.5" }
	pod, sc := h.liveRun("codex", "127.0.0.1", codex)
	// 4000 input tokens at $1.25 and 100 output at $10 per million.
	sc.line(usageLine("gpt-5.5", 4000, 100, ""))
	run := h.usageIs("codex", 4100)
	if u := run.Status.Usage; u.CostUSD != "0.006" || !u.CostEstimated || !u.ByModel["gpt-5.5"].CostEstimated {
		t.Errorf("live usage %+v", u)
	}
	// Exhausted is False from the budget's start: what shows the live usage
	// counted is the spend, which comes once the budget's controller has
	// seen the run's status (after the run's own status, not with it).
	h.eventually("the codex budget's spend", func() string {
		b := h.getBudget("codex-cost")
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionExhausted)
		if b.Status.Spent.CostUSD != "0.006" || !b.Status.Spent.CostEstimated || c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Sprintf("status %+v", b.Status)
		}
		return ""
	})
	sc.line(usageLine("gpt-5.5", 4000, 100, ""))
	b := h.budgetIs("codex-cost", metav1.ConditionTrue)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionExhausted); c.Reason != v1alpha1.ReasonCostSpent ||
		!strings.Contains(c.Message, "$0.012 of $0.01 (estimated in part from the price table)") {
		t.Errorf("condition %+v", c)
	}
	h.eventually("the codex run stopped", func() string {
		if p, ok := h.podExists(pod); !ok || p.DeletionTimestamp == nil {
			return "Pod not deleted"
		}
		return ""
	})
	// The end (no cost from codex) is priced too.
	h.setStatus(pod, agentExited(h.clock.Now(), 130, "Error", endWith(events.StatusInterrupted, 8200, "gpt-5.5"), true))
	run = h.phaseIs("codex", v1alpha1.PhaseFailed)
	if u := run.Status.Usage; u.CostUSD != "0.01025" || !u.CostEstimated || succeeded(run).Reason != v1alpha1.ReasonBudgetExceeded {
		t.Errorf("end usage %+v reason %s", u, succeeded(run).Reason)
	}

	// A model without a price: tokens only.
	if err := h.c.Delete(h.ctx, h.getBudget("codex-cost")); err != nil {
		t.Fatal(err)
	}
	h.createBudget("unpriced", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "24h"}, MaxCostUSD: "5",
		Selector: &v1alpha1.BudgetSelector{MatchExpressions: []v1alpha1.BudgetSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpDoesNotExist}}}})
	h.finishedRun("mystery", 700, "gpt-mystery", func(s *v1alpha1.AgentRunSpec) { s.Runtime = v1alpha1.RuntimeCodex })
	h.eventually("the unpriced tokens in the budget", func() string {
		b := h.getBudget("unpriced")
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionExhausted)
		if b.Status.Spent.UnpricedTokens != 700 || c == nil || !strings.Contains(c.Message, "700 tokens of gpt-mystery have no cost or price") {
			return fmt.Sprintf("status %+v", b.Status)
		}
		return ""
	})
}

// TestBudgetKeepsDeletedRunsAcrossRestarts: deleting a run does not give
// its spend back, also after the manager restarted.
func TestBudgetKeepsDeletedRunsAcrossRestarts(t *testing.T) {
	h := newHarness(t)
	h.createBudget("daily", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay}, MaxTokens: ptr.To[int64](1000)})
	_, sc := h.liveRun("doomed", "127.0.0.1", nil)
	sc.line(usageLine("m", 800, 0, ""))
	h.usageIs("doomed", 800)
	h.eventually("the budget counts 800", func() string {
		if b := h.getBudget("daily"); b.Status.Spent.Tokens != 800 {
			return fmt.Sprintf("spent %+v", b.Status.Spent)
		}
		return ""
	})
	// The deleted run had made another call the status had not shown.
	h.stopController()
	h.intervals = LiveIntervals{Usage: time.Hour, Progress: time.Hour}
	h.start()
	// The new manager takes the document its status already holds as
	// written; the next one waits for the interval.
	h.eventually("the new manager has caught up", func() string {
		doc, w := h.live.latest(h.get("doomed").UID)
		if doc == nil || w.cursor != doc.Cursor() {
			return fmt.Sprintf("document %+v, written %+v", doc, w)
		}
		return ""
	})
	sc.line(usageLine("m", 300, 0, ""))
	h.eventually("the manager has read the last document", func() string {
		if doc, _ := h.live.latest(h.get("doomed").UID); doc == nil || doc.ModelCalls != 2 {
			return fmt.Sprintf("document %+v", doc)
		}
		return ""
	})
	if err := h.c.Delete(h.ctx, h.get("doomed")); err != nil {
		t.Fatal(err)
	}
	b := h.budgetIs("daily", metav1.ConditionTrue)
	if b.Status.Spent.Tokens != 1100 || len(b.Status.Deleted) != 1 || b.Status.Deleted[0].Runs != 1 || len(b.Status.Runs) != 0 {
		t.Errorf("after the delete: %+v", b.Status)
	}
	h.stopController()
	h.start()
	h.createRun("after-restart", nil)
	h.phaseIs("after-restart", v1alpha1.PhaseQueued)
	if b := h.getBudget("daily"); b.Status.Spent.Tokens != 1100 {
		t.Errorf("after the restart: spent %+v", b.Status.Spent)
	}
}

// TestPreemptedByQueue: Kueue preempts or evicts an admitted run by
// suspending its Job (and the Job controller deletes its Pod): the run ends
// with reason Preempted, not PodDeleted, keeping what the agent reached,
// and its Job is deleted so that the queue cannot start the agent again.
func TestPreemptedByQueue(t *testing.T) {
	h := newHarness(t)
	h.createRun("preempted", func(s *v1alpha1.AgentRunSpec) {
		s.PodOverrides = &v1alpha1.PodOverrides{Labels: map[string]string{KueueQueueLabel: "agents"}}
	})
	job := h.job("preempted")
	h.phaseIs("preempted", v1alpha1.PhaseQueued)
	h.modify(job, false, func() { job.Spec.Suspend = ptr.To(false) })
	pod := h.startPod(job)
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("preempted", v1alpha1.PhaseRunning)

	// Kueue takes the quota back: the Job is suspended, its Pod deleted.
	h.modify(job, false, func() { job.Spec.Suspend = ptr.To(true) })
	if err := h.c.Delete(h.ctx, pod); err != nil {
		t.Fatal(err)
	}
	h.setStatus(pod, agentExited(h.clock.Now(), 130, "Error", endWith(events.StatusInterrupted, 300, "m"), true))
	run := h.phaseIs("preempted", v1alpha1.PhaseFailed)
	if c := succeeded(run); c.Reason != v1alpha1.ReasonPreempted || !strings.Contains(run.Status.Detail, "suspended by its queue") || *run.Status.Usage.TotalTokens != 300 {
		t.Errorf("reason %s detail %q usage %+v", c.Reason, run.Status.Detail, run.Status.Usage)
	}
	h.eventually("the suspended Job deleted", func() string {
		j := &batchv1.Job{}
		err := h.c.Get(h.ctx, client.ObjectKeyFromObject(job), j)
		if isNotFound(err) || (err == nil && j.DeletionTimestamp != nil) {
			return ""
		}
		return fmt.Sprintf("job %v %v", err, j.DeletionTimestamp)
	})
}

// TestBudgetSelectorFailsClosed: a selector the API server accepts but
// the manager cannot read (a key whose DNS prefix is longer than a label
// allows) does not make the budget cover nothing: it is Exhausted with
// reason InvalidSelector and holds every new run of the namespace, until
// the selector is fixed.
func TestBudgetSelectorFailsClosed(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("a", 250) + ".example/team" // a prefix of 258 characters: at most 253
	h.createBudget("typo", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "1h"}, MaxTokens: ptr.To[int64](1_000_000),
		Selector: &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{long: "a"}}})
	b := h.budgetIs("typo", metav1.ConditionTrue)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionExhausted); c.Reason != v1alpha1.ReasonInvalidSelector ||
		!strings.Contains(c.Message, "spec.selector does not parse") {
		t.Errorf("Exhausted %+v", c)
	}
	h.createRun("held", nil)
	run := h.phaseIs("held", v1alpha1.PhaseQueued)
	if c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionRunning); c.Reason != v1alpha1.ReasonBudgetExhausted ||
		!strings.Contains(c.Message, "AgentBudget typo is spent: spec.selector does not parse") {
		t.Errorf("Running condition %+v", c)
	}
	if n := h.jobCount(); n != 0 {
		t.Errorf("%d Jobs while the budget cannot be read", n)
	}
	b = h.getBudget("typo")
	h.modify(b, false, func() {
		b.Spec.Selector = &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"team": "a"}}
	})
	h.budgetIs("typo", metav1.ConditionFalse)
	h.job("held")
}

// TestRelabelledEndedRunStillCounts: a run that ended keeps counting in the
// budget whose selector picked it, by the labels it had at its end
// (status.labelsAtEnd), however it is relabelled afterwards.
func TestRelabelledEndedRunStillCounts(t *testing.T) {
	h := newHarness(t)
	h.createBudget("team-a", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "1h"}, MaxTokens: ptr.To[int64](1000),
		Selector: &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"team": "a"}}})
	h.createRun("spender", nil)
	run := h.get("spender")
	h.modify(run, false, func() { run.Labels = map[string]string{"team": "a"} })
	pod := h.startPod(h.job("spender"))
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("spender", v1alpha1.PhaseRunning)
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", endWith(events.StatusFinished, 1500, "m"), true))
	run = h.phaseIs("spender", v1alpha1.PhaseSucceeded)
	if run.Status.LabelsAtEnd["team"] != "a" {
		t.Fatalf("labelsAtEnd %v", run.Status.LabelsAtEnd)
	}
	h.budgetIs("team-a", metav1.ConditionTrue)

	h.modify(run, false, func() { run.Labels = map[string]string{"team": "elsewhere"} })
	h.consistently("the relabelled run still counts", 2*time.Second, func() string {
		b := h.getBudget("team-a")
		if b.Status.Spent.Tokens != 1500 || !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ConditionExhausted) {
			return fmt.Sprintf("budget %+v", b.Status)
		}
		return ""
	})
	if got := h.get("spender").Status.LabelsAtEnd; got["team"] != "a" {
		t.Errorf("labelsAtEnd after the relabel %v", got)
	}
}
