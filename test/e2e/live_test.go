//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// sleepRun is a claude-code run of the mock's probe scenario: its first
// model call has the agent run the command, its second answers with the
// output.
func sleepRun(name, command string, port int) agentRun {
	r := claudeRun(name, "probe", port)
	r.prompt = "Please run the demo. scenario:probe probe<<<" + command + ">>>"
	return r
}

// waitCommand keeps the agent's Bash tool busy for 40 s. It is not a
// plain "sleep 40": claude-code refuses long sleeps ("Blocked: sleep 40
// ...") and the agent would move on at once.
const waitCommand = "timeout 40 tail -f /dev/null; echo waited"

// mainCalls are the main agent's calls the mock has served, in order.
func mainCalls(srv *mockmodel.Server) []mockmodel.Call {
	var out []mockmodel.Call
	for _, c := range srv.Ledger() {
		if c.Role == mockmodel.RoleMain {
			out = append(out, c)
		}
	}
	return out
}

func tokensOf(u mockmodel.Usage) int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// TestLiveUsageWhileToolRuns: an agent whose Bash tool sleeps 40 s between
// its two model calls shows the first call's tokens in .status.usage while
// it is Running, before the second call is made, and the progress names
// the sleeping command and has the proxy's meter (the key is a
// credential); the end's figures come at the end. The time from the first
// call's end (the mock's ledger) to its usage in status is logged;
// hack/bench-live-usage.sh measures it at scale.
func TestLiveUsageWhileToolRuns(t *testing.T) {
	t.Parallel()
	srv, port := startMock(t, mockmodel.Options{APIKey: e2eKey})
	const name = "e2e-live-usage"
	r := sleepRun(name, waitCommand, port)
	r.credential = true
	r.apply(t)

	var firstEnd time.Time
	var want int64
	if !eventually(3*time.Minute, func() bool {
		calls := mainCalls(srv)
		if len(calls) >= 1 && firstEnd.IsZero() {
			firstEnd, want = time.Now(), tokensOf(calls[0].Usage)
		}
		return !firstEnd.IsZero()
	}) {
		t.Fatalf("the agent made no model call: ledger %+v", srv.Ledger())
	}

	var run *v1alpha1.AgentRun
	var seen time.Time
	if !eventuallyWhile(3*time.Minute, func() bool { return len(mainCalls(srv)) == 1 }, func() bool {
		run = getRun(t, name)
		u := run.Status.Usage
		if u != nil && u.TotalTokens != nil && *u.TotalTokens == want && run.Status.Phase == v1alpha1.PhaseRunning {
			seen = time.Now()
			return true
		}
		return false
	}) {
		y, _ := kube("get", "agentrun", name, "-o", "yaml")
		t.Fatalf("the first call's %d tokens were not in status while the agent slept (main calls now %d):\n%s", want, len(mainCalls(srv)), y)
	}
	t.Logf("the first call's %d tokens were in status %s after the mock served it (while Running)", want, seen.Sub(firstEnd).Round(10*time.Millisecond))
	p := run.Status.Progress
	if p == nil || p.ModelCalls != 1 || p.ToolCalls != 1 || !strings.HasPrefix(p.Activity, "[main] tool Bash: "+waitCommand) || p.LastEventTime == nil {
		t.Errorf("progress %+v", p)
	}
	// The proxy metered every call the mock answered so far (side calls
	// too): at least the first call's tokens.
	if !eventuallyWhile(time.Minute, func() bool { return len(mainCalls(srv)) == 1 }, func() bool {
		p := getRun(t, name).Status.Progress
		return p != nil && p.MeteredTokens != nil && *p.MeteredTokens >= want
	}) {
		t.Errorf("no metered tokens in status while the agent slept: %+v", getRun(t, name).Status.Progress)
	}
	// kubectl get shows the tokens in its Tokens column meanwhile.
	if out, err := kube("get", "agentrun", name, "--no-headers"); err != nil || !strings.Contains(out, fmt.Sprint(want)) {
		t.Errorf("kubectl get: %q %v", out, err)
	}

	run = waitEnded(t, name, 3*time.Minute)
	if run.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s detail %q", run.Status.Phase, run.Status.Detail)
	}
	_, end := eventLog(t, run.Status.PodName)
	if u := run.Status.Usage; u == nil || u.InputTokens == nil || end.Usage.InputTokens == nil || *u.InputTokens != *end.Usage.InputTokens ||
		u.CostUSD == "" || u.CostEstimated {
		t.Errorf("the end's usage did not replace the live one: status %+v, end %+v", run.Status.Usage, end.Usage)
	}
	if p := run.Status.Progress; p == nil || p.ModelCalls != 2 {
		t.Errorf("progress after the end %+v", p)
	}
}

// TestBudgetStopsSecondRun: an AgentBudget that the first of two runs
// nearly spends: the second run starts, its first model call spends the
// budget, and it is stopped while its tool sleeps, ending with reason
// BudgetExceeded and a detail that names the budget, with the usage it
// had; a third run waits Queued with reason BudgetExhausted.
func TestBudgetStopsSecondRun(t *testing.T) {
	t.Parallel()
	srv, port := startMock(t, mockmodel.Options{})
	labels := map[string]string{"e2e-budget": "stop"}
	const budget = "e2e-budget"
	if _, err := kube("delete", "agentbudget", budget, "--ignore-not-found"); err != nil {
		t.Fatal(err)
	}

	first := claudeRun("e2e-budget-first", "tool", port)
	first.labels = labels
	first.apply(t)
	r1 := waitEnded(t, first.name, 3*time.Minute)
	if r1.Status.Phase != v1alpha1.PhaseSucceeded || r1.Status.Usage == nil || r1.Status.Usage.TotalTokens == nil {
		t.Fatalf("first run: phase %s usage %+v detail %q", r1.Status.Phase, r1.Status.Usage, r1.Status.Detail)
	}
	spent := *r1.Status.Usage.TotalTokens

	// The cap leaves room for one token: the second run starts, and its
	// first call spends the budget.
	manifest := fmt.Sprintf(`apiVersion: agentrun.dev/v1alpha1
kind: AgentBudget
metadata:
  name: %s
spec:
  window: {rolling: 24h}
  maxTokens: %d
  selector: {matchLabels: {e2e-budget: stop}}
`, budget, spent+1)
	if _, err := kubeIn(strings.NewReader(manifest), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kube("delete", "agentbudget", budget, "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
	if !eventually(time.Minute, func() bool {
		b := getBudget(t, budget)
		return b.Status.Spent.Tokens == spent && conditionStatus(b, v1alpha1.ConditionExhausted) == "False"
	}) {
		t.Fatalf("the budget does not count the first run: %+v", getBudget(t, budget).Status)
	}

	second := sleepRun("e2e-budget-second", waitCommand, port)
	second.labels = labels
	second.apply(t)
	r2 := waitEnded(t, second.name, 3*time.Minute)
	st := r2.Status
	t.Logf("second run: phase %s end %s detail %q", st.Phase, st.EndStatus, st.Detail)
	if st.Phase != v1alpha1.PhaseFailed || st.EndStatus != events.StatusInterrupted || succeeded(r2) != "BudgetExceeded/False" {
		t.Errorf("second run: phase %s endStatus %s condition %s", st.Phase, st.EndStatus, succeeded(r2))
	}
	if !strings.Contains(st.Detail, "AgentBudget "+budget+" is spent") {
		t.Errorf("the detail does not name the budget: %q", st.Detail)
	}
	if st.Usage == nil || st.Usage.TotalTokens == nil || *st.Usage.TotalTokens == 0 {
		t.Errorf("the stopped run kept no usage: %+v", st.Usage)
	}
	// Stopped while its tool slept: its second model call never came.
	var probeCalls int
	for _, c := range mainCalls(srv) {
		if c.Scenario == "probe" {
			probeCalls++
		}
	}
	if probeCalls != 1 {
		t.Errorf("the second run made %d model calls, want 1: it was not stopped during its tool's sleep", probeCalls)
	}
	b := getBudget(t, budget)
	if conditionStatus(b, v1alpha1.ConditionExhausted) != "True" || b.Status.RunCount != 2 {
		t.Errorf("budget status %+v", b.Status)
	}

	// A new run the budget covers waits.
	third := claudeRun("e2e-budget-third", "tool", port)
	third.labels = labels
	third.apply(t)
	t.Cleanup(func() {
		if _, err := kube("delete", "agentrun", third.name, "--ignore-not-found", "--wait=false"); err != nil {
			t.Error(err)
		}
	})
	if !eventually(time.Minute, func() bool {
		r := getRun(t, third.name)
		for _, c := range r.Status.Conditions {
			if c.Type == v1alpha1.ConditionRunning {
				return r.Status.Phase == v1alpha1.PhaseQueued && c.Reason == "BudgetExhausted" && strings.Contains(c.Message, budget)
			}
		}
		return false
	}) {
		y, _ := kube("get", "agentrun", third.name, "-o", "yaml")
		t.Errorf("the third run is not held by the budget:\n%s", y)
	}
	if out, _ := kube("get", "job", third.name, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("the held run has a Job: %s", out)
	}
}

func getBudget(t *testing.T, name string) *v1alpha1.AgentBudget {
	t.Helper()
	out, err := kube("get", "agentbudget", name, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var b v1alpha1.AgentBudget
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

func conditionStatus(b *v1alpha1.AgentBudget, typ string) string {
	for _, c := range b.Status.Conditions {
		if c.Type == typ {
			return string(c.Status)
		}
	}
	return ""
}

// eventuallyWhile polls cond every 250 ms while still holds (at most d);
// it reports whether cond held before still stopped holding.
func eventuallyWhile(d time.Duration, still, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if cond() {
			return true
		}
		if !still() {
			return cond()
		}
	}
	return false
}
