//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// slowMock answers every call with a stream that trickles for two minutes,
// so a run is still busy when the test acts on it.
func slowMock(t *testing.T) int {
	_, port := startMock(t, mockmodel.Options{SlowInterval: 300 * time.Millisecond, SlowMax: 2 * time.Minute})
	return port
}

// TestTimeout: spec.timeout ends a run that is still talking to the model
// with end status timeout and phase Failed, reason Timeout; the event
// stream ends the same way, and the agent container exits 124 (timeout(1)'s
// code). The exit code in the status is the CLI's own, as in the end event.
func TestTimeout(t *testing.T) {
	t.Parallel()
	port := slowMock(t)
	const name = "e2e-timeout"
	r := claudeRun(name, "slow", port)
	r.timeout = "8s"
	applied := r.apply(t)
	run := waitEnded(t, name, 3*time.Minute)
	took := time.Since(applied)
	t.Logf("%s %s after apply", run.Status.Phase, took.Round(100*time.Millisecond))
	st := run.Status
	if st.Phase != "Failed" || st.EndStatus != events.StatusTimeout {
		t.Errorf("phase %s endStatus %s detail %q", st.Phase, st.EndStatus, st.Detail)
	}
	if st.Detail != "--timeout 8 reached" {
		t.Errorf("detail %q does not name the timeout", st.Detail)
	}
	reason := succeeded(run)
	if reason != "Timeout/False" {
		t.Errorf("Succeeded condition %s, want Timeout/False", reason)
	}
	if took < 8*time.Second {
		t.Errorf("ended %s after apply, before its 8s timeout", took)
	}
	_, end := eventLog(t, st.PodName)
	if end.Status != events.StatusTimeout || code(end.ExitCode) != code(st.ExitCode) {
		t.Errorf("end event: status %s exit code %s; status exit code %s", end.Status, code(end.ExitCode), code(st.ExitCode))
	}
	pod := getPod(t, st.PodName)
	if c := containerStatus(pod, "agent"); c == nil || c.State.Terminated == nil || c.State.Terminated.ExitCode != 124 {
		t.Errorf("agent container %+v, want terminated with exit code 124", c)
	}
}

// TestDeletedAgentRun: deleting a run while its agent works stops the agent
// (the Pod's SIGTERM ends the stream with status interrupted, seen through
// `kubectl logs -f` on the events sidecar, which outlives the agent) and
// leaves nothing behind: the Job and the Pod go too, the harvest finalizer
// does not hold the Pod.
func TestDeletedAgentRun(t *testing.T) {
	t.Parallel()
	const name = "e2e-deleted"
	pod := workingRun(t, name)
	wait := follow(t, pod)
	time.Sleep(time.Second) // into the slow model call
	deleted := time.Now()
	if _, err := kube("delete", "agentrun", name, "--wait=false"); err != nil {
		t.Fatal(err)
	}

	stream, types := parseStream(t, wait(2*time.Minute))
	t.Logf("events after delete: %s", strings.Join(types, " "))
	if len(stream) < 2 || types[0] != "start" {
		t.Fatalf("stream %v", types)
	}
	end, ok := stream[len(stream)-1].(*events.End)
	if !ok {
		t.Fatalf("the stream of a deleted run has no end: %v", types)
	}
	if end.Status != events.StatusInterrupted {
		t.Errorf("end of a deleted run: status %s exit code %s", end.Status, code(end.ExitCode))
	}

	gone := eventually(2*time.Minute, func() bool {
		for _, obj := range []string{"agentrun/" + name, "job/" + name, "pod/" + pod} {
			if out, _ := kube("get", obj, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
				return false
			}
		}
		return true
	})
	if !gone {
		left, _ := kube("get", "agentrun,job,pod", "-o", "wide")
		t.Fatalf("left behind %s after the delete:\n%s", time.Since(deleted).Round(time.Second), left)
	}
	t.Logf("AgentRun, Job and Pod gone %s after the delete", time.Since(deleted).Round(100*time.Millisecond))
}

// TestPodDeletedMidRun: a Pod deleted while its agent works (a drained
// node, a hasty kubectl delete) ends the run truthfully: the agent's
// SIGTERM gives end status interrupted, the harvest finalizer keeps the Pod
// until the controller has read that, and the run is Failed with reason
// PodDeleted, saying when; the Job does not start the agent again.
func TestPodDeletedMidRun(t *testing.T) {
	t.Parallel()
	const name = "e2e-pod-deleted"
	pod := workingRun(t, name)
	time.Sleep(time.Second) // into the slow model call
	deleted := time.Now()
	if _, err := kube("delete", "pod", pod, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	run := waitEnded(t, name, 2*time.Minute)
	st := run.Status
	t.Logf("phase %s endStatus %s detail %q", st.Phase, st.EndStatus, st.Detail)
	if st.Phase != "Failed" || st.EndStatus != events.StatusInterrupted || st.PodName != pod {
		t.Errorf("phase %s endStatus %s pod %s (deleted %s)", st.Phase, st.EndStatus, st.PodName, pod)
	}
	reason := succeeded(run)
	if reason != "PodDeleted/False" {
		t.Errorf("Succeeded condition %s, want PodDeleted/False", reason)
	}
	// The detail names the moment of the delete (not the end of its grace
	// period, which is the Pod's deletionTimestamp).
	var at time.Time
	if rest, ok := strings.CutPrefix(st.Detail, "the Pod was deleted at "); ok && rest != "" {
		at, _ = time.Parse(time.RFC3339, strings.Fields(rest)[0])
	}
	if d := at.Sub(deleted); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("detail %q: the delete was at %s", st.Detail, deleted.UTC().Format(time.RFC3339))
	}
	// No second agent: the Job has had exactly the one Pod.
	if out, _ := kube("get", "pods", "-l", "job-name="+name, "-o", "name"); strings.Count(out, "pod/") > 1 {
		t.Errorf("the Job started the agent again: %s", out)
	}
	// Once harvested, the finalizer is gone and the Pod with it.
	if !eventually(time.Minute, func() bool {
		out, _ := kube("get", "pod", pod, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == ""
	}) {
		t.Errorf("the deleted Pod %s is still there after the harvest", pod)
	}
}

// workingRun applies a claude-code run of the slow scenario and waits until
// its agent is at work (its prompt is in the event stream, the model call
// trickles on); it returns the run's Pod.
func workingRun(t *testing.T, name string) string {
	t.Helper()
	claudeRun(name, "slow", slowMock(t)).apply(t)
	var pod string
	started := eventually(2*time.Minute, func() bool {
		run := getRun(t, name)
		if run.Status.Phase != "Running" || run.Status.PodName == "" {
			return false
		}
		pod = run.Status.PodName
		logs, err := kube("logs", pod, "-c", "events")
		return err == nil && strings.Contains(logs, `"type":"prompt"`)
	})
	if !started {
		y, _ := kube("get", "agentrun", name, "-o", "yaml")
		t.Fatalf("the run did not start working:\n%s", y)
	}
	return pod
}

// code prints an optional exit code (the event's *int, the status's *int32).
func code[N int | int32](c *N) string {
	if c == nil {
		return "null"
	}
	return strconv.Itoa(int(*c))
}
