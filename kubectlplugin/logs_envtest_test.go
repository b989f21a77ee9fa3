package kubectlplugin

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// seedStream is docs/events.md's example stream, its lines, and its text
// rendering.
func seedStream(t *testing.T) (stream string, lines []string, text string) {
	t.Helper()
	stream = string(readFile(t, seed+".jsonl"))
	lines = strings.SplitAfter(stream, "\n")
	return stream, lines[:len(lines)-1], string(readFile(t, seed+".txt"))
}

var claude = v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}

// TestLogs: logs finds the run's Pod on a real API server, reads the
// events container's log (served by fakeLogs) and says clearly why there
// is none to read.
func TestLogs(t *testing.T) {
	cl := newCluster(t)
	stream, lines, text := seedStream(t)
	withoutEnd := strings.Join(lines[:len(lines)-1], "")

	t.Run("an ended run's whole log", func(t *testing.T) {
		run := cl.run("ended", nil, claude, finishedStatus("ended-pod"))
		cl.pod(run, "ended-pod", terminatedState)
		cl.logs.set("ended-pod", fakeLog{data: []byte(stream)})
		for _, args := range [][]string{{"logs", "ended", "-n", cl.ns}, {"logs", "-f", "ended", "-n", cl.ns}} {
			r := cl.plugin(args...)
			if r.code != 0 || r.stdout != text || r.stderr != "" {
				t.Errorf("%v: exit %d, stderr %q, stdout\n%s", args, r.code, r.stderr, r.stdout)
			}
		}
		r := cl.plugin("logs", "ended", "-n", cl.ns, "--format", "jsonl")
		if r.code != 0 || r.stdout != stream {
			t.Errorf("jsonl: exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
	})

	t.Run("the Pod found by the run's uid before status names it", func(t *testing.T) {
		run := cl.run("unnamed", nil, claude, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning})
		cl.pod(run, "unnamed-pod", runningState)
		cl.logs.set("unnamed-pod", fakeLog{data: []byte(stream)})
		if r := cl.plugin("logs", "unnamed", "-n", cl.ns); r.code != 0 || r.stdout != text {
			t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
	})

	t.Run("a run in progress without -f", func(t *testing.T) {
		run := cl.run("going", nil, claude, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, PodName: "going-pod"})
		cl.pod(run, "going-pod", runningState)
		// The sidecar is writing the sixth line.
		cl.logs.set("going-pod", fakeLog{data: []byte(strings.Join(lines[:5], "") + lines[5][:20])})
		r := cl.plugin("logs", "going", "-n", cl.ns, "--format", "jsonl")
		if r.code != 0 || r.stdout != strings.Join(lines[:5], "") ||
			r.stderr != "agentrun going is in progress (Running): -f follows it to its end\n" {
			t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
	})

	t.Run("a log that ended without its end event", func(t *testing.T) {
		run := cl.run("killed", nil, claude, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, EndStatus: "failed", PodName: "killed-pod",
			Conditions: succeededCondition(v1alpha1.PhaseFailed, "OOMKilled"), Detail: "the agent container was OOM-killed"})
		cl.pod(run, "killed-pod", terminatedState)
		cl.logs.set("killed-pod", fakeLog{data: []byte(withoutEnd)})
		r := cl.plugin("logs", "-f", "killed", "-n", cl.ns, "--format", "jsonl")
		if r.code != 0 || r.stdout != withoutEnd ||
			r.stderr != "the event log of agentrun killed has no end event; its status: Failed (OOMKilled): the agent container was OOM-killed\n" {
			t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
	})

	t.Run("-f waits for the Pod and its container, and reconnects", func(t *testing.T) {
		run := cl.run("later", nil, claude, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending})
		// The first followed read breaks off inside the fifth line; the
		// next one starts from the top again.
		cut := len(strings.Join(lines[:4], "")) + 10
		cl.logs.set("later-pod", fakeLog{data: []byte(stream), cut: cut})
		bg := cl.start("logs", "-f", "later", "-n", cl.ns)
		bg.waitStderr(t, "waiting for the run's Pod (Pending)\n")
		pod := cl.pod(run, "later-pod", waitingState)
		cl.setStatus(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending, PodName: "later-pod"})
		bg.waitStderr(t, "waiting for the Pod later-pod to start (ContainerCreating)\n")
		cl.podState(pod, runningState)
		r := bg.wait(t)
		if r.code != 0 || r.stdout != text {
			t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
		if got := strings.Join(cl.logs.opened(), " "); !strings.HasSuffix(got, "later-pod/events follow=true later-pod/events follow=true") {
			t.Errorf("log reads %s", got)
		}
	})

	for _, c := range []struct {
		name   string
		run    string
		status v1alpha1.AgentRunStatus
		spec   v1alpha1.AgentRunSpec
		pod    *corev1.ContainerState // the events container, when the Pod exists
		podUID string                 // the Pod's agentrun.dev/uid label, when not the run's
		args   []string
		err    string
	}{
		{name: "not found", run: "", args: []string{"-f", "nope"}, err: `agentrun "nope" not found in namespace "` + cl.ns + `"`},
		{name: "no Pod yet", run: "pending", status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending},
			err: "agentrun pending has no Pod yet (Pending): -f waits for it"},
		{name: "container not started", run: "creating", status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending, PodName: "creating-pod"},
			pod: &waitingState, err: "the Pod creating-pod has not started its events container yet (ContainerCreating): -f waits for it"},
		{name: "ended before the container started", run: "pullfail", args: []string{"-f"},
			status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, PodName: "pullfail-pod", Conditions: succeededCondition(v1alpha1.PhaseFailed, "ImagePullFailed"),
				Detail: "the runner image could not be pulled"},
			pod: &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}},
			err: "agentrun pullfail ended before the events container of its Pod pullfail-pod started: Failed (ImagePullFailed): the runner image could not be pulled"},
		{name: "Pod removed by the TTL", run: "ttl", args: []string{"-f"}, spec: v1alpha1.AgentRunSpec{Retention: &v1alpha1.Retention{JobTTLAfterEnd: "60s"}},
			status: finishedStatus("ttl-pod"),
			err: "the Pod ttl-pod of agentrun ttl is gone, and its event log with it: spec.retention.jobTTLAfterEnd (60s) removes the Job and Pod after the end. " +
				"The AgentRun keeps the outcome, Succeeded (Finished): kubectl agentrun get ttl; the whole result: kubectl get agentrun ttl -o jsonpath='{.status.result}'"},
		{name: "Pod deleted", run: "deleted", status: finishedStatus("deleted-pod"),
			err: "the Pod deleted-pod of agentrun deleted is gone, and its event log with it (it was deleted). The AgentRun keeps the outcome, Succeeded (Finished)"},
		{name: "the named Pod is another run's", run: "reused", status: finishedStatus("reused-pod"), pod: &terminatedState, podUID: "an-older-run",
			err: "the Pod reused-pod of agentrun reused is gone"},
		{name: "Pod gone mid-run", run: "midrun", status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, PodName: "midrun-pod"},
			err: "the Pod midrun-pod of agentrun midrun is gone, and its event log with it; the run ends without it (Running)"},
		{name: "cancelled before a Pod", run: "cancelled", args: []string{"-f"}, status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed,
			EndStatus: "interrupted", Conditions: succeededCondition(v1alpha1.PhaseFailed, "Cancelled"), Detail: "cancelled before the agent started"},
			err: "agentrun cancelled ended without a Pod, so there is no event log. The AgentRun keeps the outcome, Failed (Cancelled): cancelled before the agent started"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "nope"
			if c.run != "" {
				name = c.run
				spec := c.spec
				spec.Runtime = v1alpha1.RuntimeClaudeCode
				run := cl.run(c.run, nil, spec, c.status)
				if c.pod != nil {
					pod := cl.pod(run, c.status.PodName, *c.pod)
					if c.podUID != "" {
						pod.Labels[labelUID] = c.podUID
						if err := cl.c.Update(cl.ctx, pod); err != nil {
							t.Fatal(err)
						}
					}
					cl.logs.set(c.status.PodName, fakeLog{err: errors.New("the log must not be read")})
				}
			}
			args := append([]string{"logs", "-n", cl.ns}, c.args...)
			if c.run != "" {
				args = append(args, name)
			}
			r := cl.plugin(args...)
			if r.code != exitError || r.stdout != "" || !strings.HasPrefix(r.stderr, "kubectl agentrun logs: "+c.err) {
				t.Errorf("exit %d, stdout %q\nstderr %q\nwant   %q", r.code, r.stdout, r.stderr, c.err)
			}
		})
	}
}

// TestLogsUnreadable: -f retries a log that cannot be read while the run
// goes on, and gives up with the error once the run has ended.
func TestLogsUnreadable(t *testing.T) {
	cl := newCluster(t)
	run := cl.run("lost", nil, claude, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, PodName: "lost-pod"})
	cl.pod(run, "lost-pod", runningState)
	cl.logs.set("lost-pod", fakeLog{err: errors.New("dial tcp 10.0.0.9:10250: i/o timeout")})
	bg := cl.start("logs", "-f", "lost", "-n", cl.ns)
	bg.waitStderr(t, "the event log broke off (dial tcp 10.0.0.9:10250: i/o timeout); reading on\n")
	cl.setStatus(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, PodName: "lost-pod", Conditions: succeededCondition(v1alpha1.PhaseFailed, "PodVanished")})
	r := bg.wait(t)
	if r.code != exitError || !strings.HasSuffix(r.stderr, "kubectl agentrun logs: dial tcp 10.0.0.9:10250: i/o timeout\n") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestLogsForbidden: a user who may read AgentRuns but not pods/log is
// told so, not made to wait.
func TestLogsForbidden(t *testing.T) {
	cl := newCluster(t)
	run := cl.run("secret", nil, claude, finishedStatus("secret-pod"))
	cl.pod(run, "secret-pod", runningState)
	cl.logs.set("secret-pod", fakeLog{err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods/log"}, "secret-pod",
		errors.New(`User "dev" cannot get resource "pods/log" in API group ""`))})
	r := cl.plugin("logs", "-f", "secret", "-n", cl.ns)
	if r.code != exitError || !strings.Contains(r.stderr, `pods/log "secret-pod" is forbidden`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestLogsFollowReadsOnOnce: a followed log whose stream ends again and
// again before the end event (a connection broken each time) is read
// from its start at each reconnect, and every line is shown once: none
// twice, none lost, however many reads it takes.
func TestLogsFollowReadsOnOnce(t *testing.T) {
	cl := newCluster(t)
	stream, lines, _ := seedStream(t)
	run := cl.run("rereads", nil, claude, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, PodName: "rereads-pod"})
	cl.pod(run, "rereads-pod", runningState)
	cl.logs.set("rereads-pod", fakeLog{data: []byte(strings.Join(lines[:3], ""))})
	bg := cl.start("logs", "-f", "rereads", "-n", cl.ns, "--format", "jsonl")
	waitFor(t, "the first lines", func() bool { return bg.stdout.String() == strings.Join(lines[:3], "") })
	// Several reads of the same lines, then more come.
	waitFor(t, "reads again", func() bool { return strings.Count(strings.Join(cl.logs.opened(), " "), "follow=true") >= 4 })
	cl.logs.set("rereads-pod", fakeLog{data: []byte(strings.Join(lines[:6], ""))})
	waitFor(t, "the next lines", func() bool { return bg.stdout.String() == strings.Join(lines[:6], "") })
	waitFor(t, "reads again", func() bool { return strings.Count(strings.Join(cl.logs.opened(), " "), "follow=true") >= 8 })
	cl.logs.set("rereads-pod", fakeLog{data: []byte(stream)})
	if r := bg.wait(t); r.code != 0 || r.stdout != stream {
		t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
	}
}
