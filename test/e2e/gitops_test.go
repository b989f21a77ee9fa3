//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestCancelRunningRun: spec.stop, set with a merge patch as a GitOps
// tool or a person would, stops an agent mid-call: its Pod is deleted, the
// runner passes the SIGTERM on as SIGINT, the stream ends interrupted, and
// the AgentRun ends Failed with reason Cancelled, keeping the usage the
// agent had reached (the same as the stream's end event). The Pod goes once
// harvested; the AgentRun stays; nothing runs again; the cancel cannot be
// undone.
func TestCancelRunningRun(t *testing.T) {
	t.Parallel()
	const name = "e2e-cancel"
	pod := workingRun(t, name)
	wait := follow(t, pod)
	time.Sleep(time.Second) // into the slow model call
	cancelled := time.Now()
	if _, err := kube("patch", "agentrun", name, "--type", "merge", "-p", `{"spec":{"stop":"Graceful"}}`); err != nil {
		t.Fatal(err)
	}

	run := waitEnded(t, name, 2*time.Minute)
	st := run.Status
	t.Logf("ended %s after the cancel: %s/%s %q", time.Since(cancelled).Round(100*time.Millisecond), st.EndStatus, succeeded(run), st.Detail)
	if st.Phase != v1alpha1.PhaseFailed || st.EndStatus != events.StatusInterrupted || succeeded(run) != "Cancelled/False" {
		t.Errorf("phase %s endStatus %s Succeeded %s, want Failed, interrupted, Cancelled/False", st.Phase, st.EndStatus, succeeded(run))
	}
	if c := condition(run, v1alpha1.ConditionEnded); c != "Cancelled/True" {
		t.Errorf("Ended condition %s", c)
	}
	if !strings.HasPrefix(st.Detail, "cancelled (spec.stop): the agent was stopped at ") {
		t.Errorf("detail %q", st.Detail)
	}
	if st.ObservedGeneration != run.Generation {
		t.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, run.Generation)
	}
	// The partial usage: the in-flight call's input tokens, as in the
	// stream's end event.
	stream, types := parseStream(t, wait(2*time.Minute))
	t.Logf("events: %s", strings.Join(types, " "))
	end, ok := stream[len(stream)-1].(*events.End)
	if !ok || end.Status != events.StatusInterrupted {
		t.Fatalf("the stream of a cancelled run does not end interrupted: %v", types)
	}
	u := st.Usage
	if u == nil || u.InputTokens == nil || *u.InputTokens == 0 || end.Usage.InputTokens == nil || *end.Usage.InputTokens != *u.InputTokens {
		t.Errorf("status usage %+v, end event usage %+v: want the partial usage of the end event", u, end.Usage)
	}

	// The Pod goes once harvested; the record and the Job stay.
	if !eventually(time.Minute, func() bool {
		out, _ := kube("get", "pod", pod, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == ""
	}) {
		t.Errorf("the cancelled run's Pod %s is still there", pod)
	}
	if _, err := kube("get", "agentrun", name); err != nil {
		t.Errorf("the AgentRun is gone: %v", err)
	}
	time.Sleep(3 * time.Second)
	if out, _ := kube("get", "pods", "-l", "job-name="+name, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("the cancelled run started again: %s", out)
	}
	if out, err := kube("patch", "agentrun", name, "--type", "json", "-p", `[{"op":"remove","path":"/spec/stop"}]`); err == nil ||
		!strings.Contains(out+err.Error(), "spec.stop cannot be unset") {
		t.Errorf("unsetting spec.stop: %v %s", err, out)
	}
}

// TestTTLKeepsRecord: spec.retention.jobTTLAfterEnd removes the Job and the
// Pod of a finished run; the AgentRun stays with its status (result,
// usage, cost), so there is nothing for a GitOps tool to re-create, and no
// new Job appears.
func TestTTLKeepsRecord(t *testing.T) {
	t.Parallel()
	_, port := startMock(t, mockmodel.Options{})
	const name = "e2e-ttl"
	r := claudeRun(name, "parallel", port)
	r.jobTTL = "5s"
	r.apply(t)
	run := waitEnded(t, name, 3*time.Minute)
	st := run.Status
	if st.Phase != v1alpha1.PhaseSucceeded || st.Result == nil || *st.Result != parallelResult || st.Usage == nil || st.Usage.CostUSD == "" {
		t.Fatalf("the run did not succeed with its result and usage: %+v", st)
	}
	gone := eventually(2*time.Minute, func() bool {
		for _, obj := range []string{"job/" + st.JobName, "pod/" + st.PodName} {
			if out, _ := kube("get", obj, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
				return false
			}
		}
		return true
	})
	if !gone {
		left, _ := kube("get", "job,pod", "-o", "wide")
		t.Fatalf("the Job and Pod are still there after the TTL:\n%s", left)
	}
	time.Sleep(5 * time.Second) // a re-created Job would show by now
	after := getRun(t, name)
	as := after.Status
	if as.Phase != st.Phase || *as.Result != *st.Result || as.Usage.CostUSD != st.Usage.CostUSD ||
		*as.Usage.TotalTokens != *st.Usage.TotalTokens || !as.CompletionTime.Equal(st.CompletionTime) || succeeded(after) != "Finished/True" {
		t.Errorf("the record changed after the TTL:\nbefore %+v\nafter  %+v", st, as)
	}
	if out, _ := kube("get", "job", st.JobName, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("a Job is back after the TTL: %s", out)
	}
	evs, _ := kube("get", "events", "--field-selector", "involvedObject.name="+name, "-o", "jsonpath={.items[*].reason}")
	if !strings.Contains(evs, "JobRemoved") {
		t.Errorf("events %q lack JobRemoved", evs)
	}
}

// condition is the run's condition of type typ as reason/status.
func condition(run *v1alpha1.AgentRun, typ string) string {
	for _, c := range run.Status.Conditions {
		if c.Type == typ {
			return c.Reason + "/" + string(c.Status)
		}
	}
	return "none"
}
