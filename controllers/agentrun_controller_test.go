package controllers

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// User stories against a real API server. The test plays the parts envtest
// lacks: the Job controller creates the Pod, the kubelet sets its container
// statuses, the events sidecar's log is served by the fake log reader.

func (h *harness) createRun(name string, edit func(*v1alpha1.AgentRunSpec)) *v1alpha1.AgentRun {
	h.t.Helper()
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Prompt: v1alpha1.PromptSource{Text: ptr.To("say hi")}}}
	if edit != nil {
		edit(&run.Spec)
	}
	if err := h.c.Create(h.ctx, run); err != nil {
		h.t.Fatalf("create AgentRun %s: %v", name, err)
	}
	return run
}

func (h *harness) job(name string) *batchv1.Job {
	h.t.Helper()
	job := &batchv1.Job{}
	h.eventually("Job "+name, func() string {
		if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, job); err != nil {
			return err.Error()
		}
		return ""
	})
	return job
}

func (h *harness) jobCount() int {
	list := &batchv1.JobList{}
	if err := h.c.List(h.ctx, list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	return len(list.Items)
}

// startPod creates the Job's Pod as the Job controller would: from the
// template, owned by the Job, with the Job controller's own finalizer.
func (h *harness) startPod(job *batchv1.Job) *corev1.Pod {
	h.t.Helper()
	tpl := job.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: job.Name + "-x7k2p", Namespace: job.Namespace,
			Labels: tpl.Labels, Annotations: tpl.Annotations,
			Finalizers:      append(append([]string{}, tpl.Finalizers...), "batch.kubernetes.io/job-tracking"),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: tpl.Spec,
	}
	if err := h.c.Create(h.ctx, pod); err != nil {
		h.t.Fatalf("create Pod: %v", err)
	}
	return pod
}

// modify reads obj afresh, applies edit and writes it back (its status
// when status is true), again when the controller wrote in between.
func (h *harness) modify(obj client.Object, status bool, edit func()) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		edit()
		if status {
			return h.c.Status().Update(h.ctx, obj)
		}
		return h.c.Update(h.ctx, obj)
	})
	if err != nil {
		h.t.Fatalf("update %s: %v", obj.GetName(), err)
	}
}

// setStatus plays the kubelet.
func (h *harness) setStatus(pod *corev1.Pod, edit func(*corev1.PodStatus)) {
	h.t.Helper()
	cur := pod.DeepCopy()
	h.modify(cur, true, func() { edit(&cur.Status) })
}

func (h *harness) podExists(pod *corev1.Pod) (*corev1.Pod, bool) {
	cur := &corev1.Pod{}
	err := h.c.Get(h.ctx, client.ObjectKeyFromObject(pod), cur)
	if isNotFound(err) {
		return nil, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return cur, true
}

func running(at time.Time) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.InitContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.EventsContainer, Image: "agentrun-runner:test", Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.AgentContainer, Image: "agentrun-runner:test", Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}
	}
}

// agentExited sets the agent container's termination; sidecarDone also
// ends the events container.
func agentExited(at time.Time, code int32, reason, message string, sidecarDone bool) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		running(at.Add(-time.Minute))(s)
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: message,
			StartedAt: metav1.NewTime(at.Add(-time.Minute)), FinishedAt: metav1.NewTime(at)}}
		if sidecarDone {
			s.Phase = corev1.PodSucceeded
			if code != 0 {
				s.Phase = corev1.PodFailed
			}
			s.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: metav1.NewTime(at.Add(-time.Minute)), FinishedAt: metav1.NewTime(at.Add(time.Second))}}
		}
	}
}

// anEnd is the end event of a finished run with two models.
func anEnd(result string) *events.End {
	i := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	sonnet := events.TokenCounts{InputTokens: i(15114), OutputTokens: i(827), CacheReadTokens: i(32200), CacheWriteTokens: i(3900), CostUSD: f(0.0384916)}
	haiku := events.TokenCounts{InputTokens: i(3120), OutputTokens: i(85), CacheReadTokens: i(9800), CacheWriteTokens: i(1200), CostUSD: f(0.0052)}
	total := events.TokenCounts{InputTokens: i(18234), OutputTokens: i(912), CacheReadTokens: i(42000), CacheWriteTokens: i(5100), CostUSD: f(0.0436916)}
	sid := "0b9ad7a1-6c1e-4d65-9d8e-1f1b0a4d2c77"
	return &events.End{Status: events.StatusFinished, ExitCode: ptr.To(0), DurationMs: 31250, Result: &result, SessionID: &sid,
		Usage: events.Totals{TokenCounts: total, ByModel: map[string]events.TokenCounts{"claude-sonnet-5-5": sonnet, "claude-haiku-4-5": haiku}}}
}

var counters = aggregator.Counters{Tools: 7, ToolErrors: 1, Denials: 2, Subagents: 1, DeniedConnections: 3}

func message(e *events.End) string { return string(podcontract.FromEnd(e, counters).Encode()) }

func endLine(e *events.End) []byte {
	events.Stamp(e, events.TypeEnd, time.Now())
	b, err := events.Marshal(e)
	if err != nil {
		panic(err)
	}
	return b
}

func succeeded(run *v1alpha1.AgentRun) *metav1.Condition {
	return meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionSucceeded)
}

// phaseIs waits for a phase and returns the run.
func (h *harness) phaseIs(name string, phase v1alpha1.Phase) *v1alpha1.AgentRun {
	h.t.Helper()
	var run *v1alpha1.AgentRun
	h.eventually(name+" in phase "+string(phase), func() string {
		run = h.get(name)
		if run.Status.Phase != phase {
			return fmt.Sprintf("phase %q, status %+v", run.Status.Phase, run.Status)
		}
		return ""
	})
	return run
}

func TestJobAndPodShape(t *testing.T) {
	h := newHarness(t)
	h.createRun("shape", func(s *v1alpha1.AgentRunSpec) {
		s.Model = "claude-sonnet-5-5"
		s.Env = []corev1.EnvVar{{Name: "ANTHROPIC_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: "anthropic"}}}}
		s.Limits = &v1alpha1.Limits{MaxTurns: ptr.To[int32](20)}
	})
	job := h.job("shape")
	run := h.phaseIs("shape", v1alpha1.PhasePending)

	if !metav1.IsControlledBy(job, run) {
		t.Errorf("the Job is not controlled by the AgentRun: %+v", job.OwnerReferences)
	}
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 3600+600 || *job.Spec.Suspend {
		t.Errorf("job spec: backoffLimit %d deadline %d suspend %v", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds, *job.Spec.Suspend)
	}
	if job.Labels[LabelUID] != string(run.UID) || job.Labels[LabelName] != "shape" {
		t.Errorf("job labels %v", job.Labels)
	}
	pod := job.Spec.Template.Spec
	if *pod.AutomountServiceAccountToken || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Error("the agent Pod must not get a service-account token, nor restart")
	}
	agent := pod.Containers[0]
	args := strings.Join(agent.Args, " ")
	for _, want := range []string{"--events /agentrun/events.jsonl", "--summary /dev/termination-log", "--model claude-sonnet-5-5",
		"--max-turns 20", "--timeout 3600", "--pass-env ANTHROPIC_API_KEY", "--prompt-file " + podcontract.PromptFile + " --"} {
		if !strings.Contains(args, want) {
			t.Errorf("agent args lack %q: %s", want, args)
		}
	}
	if job.Spec.Template.Annotations[AnnotationPrompt] != "say hi" {
		t.Errorf("the Pod's prompt annotation %q, want the prompt", job.Spec.Template.Annotations[AnnotationPrompt])
	}
	if strings.Contains(args, "anthropic") {
		t.Errorf("a secret reference leaked into the arguments: %s", args)
	}
	if agent.Env[0].ValueFrom.SecretKeyRef.Name != "keys" {
		t.Errorf("the API key must come from the Secret as an env var: %+v", agent.Env)
	}
	if pod.InitContainers[0].Name != podcontract.EventsContainer || *pod.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the events container must be a native sidecar: %+v", pod.InitContainers)
	}
	if c := succeeded(run); c == nil || c.Status != metav1.ConditionUnknown || run.Status.JobName != "shape" || run.Status.ObservedGeneration != run.Generation {
		t.Errorf("status %+v", run.Status)
	}

	// Reconciles from later changes never make a second Job.
	for i := range 3 {
		cur := h.get("shape")
		h.modify(cur, false, func() { cur.Annotations = map[string]string{"poke": fmt.Sprint(i)} })
	}
	h.consistently("exactly one Job", time.Second, func() string {
		if n := h.jobCount(); n != 1 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
}

func TestQueuedJob(t *testing.T) {
	h := newHarness(t)
	h.createRun("queued", func(s *v1alpha1.AgentRunSpec) {
		s.PodOverrides = &v1alpha1.PodOverrides{Labels: map[string]string{KueueQueueLabel: "agents"}}
	})
	job := h.job("queued")
	if !*job.Spec.Suspend || job.Labels[KueueQueueLabel] != "agents" {
		t.Fatalf("a Job with a queue label is created suspended with the label: suspend %v labels %v", *job.Spec.Suspend, job.Labels)
	}
	run := h.phaseIs("queued", v1alpha1.PhaseQueued)
	if c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionRunning); c.Reason != "Queued" {
		t.Errorf("Running condition %+v", c)
	}
	// Kueue admits the Job: it unsuspends it, the Pod starts.
	h.modify(job, false, func() { job.Spec.Suspend = ptr.To(false) })
	pod := h.startPod(job)
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("queued", v1alpha1.PhaseRunning)
}

func TestHarvestFromTerminationMessage(t *testing.T) {
	h := newHarness(t)
	h.createRun("done", nil)
	pod := h.startPod(h.job("done"))
	h.setStatus(pod, running(h.clock.Now()))
	run := h.phaseIs("done", v1alpha1.PhaseRunning)
	if run.Status.StartTime == nil || run.Status.PodName != pod.Name {
		t.Errorf("running status %+v", run.Status)
	}
	h.waitEvent("done", "Normal/Started")
	if _, ok := h.podExists(pod); !ok {
		t.Fatal("pod gone")
	}

	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(anEnd("All tests pass.")), true))
	run = h.phaseIs("done", v1alpha1.PhaseSucceeded)
	st := run.Status
	c := succeeded(run)
	if c.Status != metav1.ConditionTrue || c.Reason != "Finished" {
		t.Errorf("Succeeded condition %+v", c)
	}
	u := st.Usage
	if *st.Result != "All tests pass." || st.ResultTruncated || st.EndStatus != "finished" || *st.ExitCode != 0 ||
		*st.DurationMs != 31250 || st.SessionID != "0b9ad7a1-6c1e-4d65-9d8e-1f1b0a4d2c77" || st.CompletionTime == nil {
		t.Errorf("status %+v", st)
	}
	if *u.InputTokens != 18234 || *u.TotalTokens != 18234+912+42000+5100 || u.CostUSD != "0.0436916" ||
		u.ByModel["claude-haiku-4-5"].CostUSD != "0.0052" || len(u.ByModel) != 2 {
		t.Errorf("usage %+v", u)
	}
	if *st.Counters != (v1alpha1.Counters{Tools: 7, ToolErrors: 1, Denials: 2, Subagents: 1, DeniedConnections: 3}) {
		t.Errorf("counters %+v", st.Counters)
	}
	if n := h.logs.readCount(); n != 0 {
		t.Errorf("the log was read %d times although the summary was whole", n)
	}
	h.waitEvent("done", "Normal/Finished")

	// Once the result is in status the Pod is released (only the Job
	// controller's finalizer stays).
	h.eventually("harvest finalizer removed", func() string {
		p, _ := h.podExists(pod)
		for _, f := range p.Finalizers {
			if f == HarvestFinalizer {
				return "still there"
			}
		}
		return ""
	})

	// kubectl wait works on the condition.
	kubectl := kubectl(t)
	out, errOut, err := kubectl.Run("wait", "--for=condition=Succeeded", "-n", h.ns, "agentrun/done", "--timeout=10s")
	if err != nil {
		b, _ := io.ReadAll(errOut)
		t.Fatalf("kubectl wait: %v: %s", err, b)
	}
	if b, _ := io.ReadAll(out); !strings.Contains(string(b), "condition met") {
		t.Errorf("kubectl wait said %q", b)
	}
	// And the printer columns show the run.
	out, _, err = kubectl.Run("get", "-n", h.ns, "ar", "done")
	if err != nil {
		t.Fatal(err)
	}
	table, _ := io.ReadAll(out)
	for _, col := range []string{"STATUS", "RUNTIME", "TOKENS", "COST", "STARTED", "Succeeded", "claude-code", "66246", "0.0436916"} {
		if !strings.Contains(string(table), col) {
			t.Errorf("kubectl get lacks %q:\n%s", col, table)
		}
	}
}

func TestHarvestCutResultFromLog(t *testing.T) {
	h := newHarness(t)
	h.createRun("long", nil)
	pod := h.startPod(h.job("long"))
	result := strings.Repeat("答案", 3000) // 18,000 bytes: cut in the summary, whole in the log
	end := anEnd(result)
	h.logs.set(h.ns, pod.Name, append(append([]byte(`{"schema":1,"type":"text","time":"x","parent":null,"text":"hi"}`+"\n"), endLine(end)...), '\n'), nil)

	// The agent ended but the sidecar has not: the log is not read yet.
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(end), false))
	h.consistently("no harvest before the sidecar terminated", 500*time.Millisecond, func() string {
		if run := h.get("long"); isTerminal(run.Status) {
			return "harvested early"
		}
		if n := h.logs.readCount(); n != 0 {
			return fmt.Sprintf("log read %d times", n)
		}
		return ""
	})

	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(end), true))
	run := h.phaseIs("long", v1alpha1.PhaseSucceeded)
	if *run.Status.Result != result || run.Status.ResultTruncated {
		t.Errorf("result of %d bytes (truncated %v), want the whole %d", len(*run.Status.Result), run.Status.ResultTruncated, len(result))
	}
	h.logs.mu.Lock()
	reads := append([]string{}, h.logs.reads...)
	h.logs.mu.Unlock()
	// A reconcile that raced with the status write may read it again:
	// every read is the bounded last line of the events container.
	for _, r := range reads {
		if !strings.HasSuffix(r, pod.Name+"/events lines=1 limit=4194304") {
			t.Errorf("log read %q: want the bounded last line of the events container", r)
		}
	}
	if len(reads) == 0 {
		t.Error("the log was never read")
	}
}

func TestHarvestCutResultLogUnreadable(t *testing.T) {
	h := newHarness(t)
	h.createRun("nolog", nil)
	pod := h.startPod(h.job("nolog"))
	end := anEnd(strings.Repeat("x", 10000))
	h.logs.set(h.ns, pod.Name, nil, fmt.Errorf("pods %q is forbidden", pod.Name))
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(end), true))
	run := h.phaseIs("nolog", v1alpha1.PhaseSucceeded)
	if !run.Status.ResultTruncated || len(*run.Status.Result) == 0 || len(*run.Status.Result) >= 10000 {
		t.Errorf("want the summary's cut result, marked: %d bytes, truncated %v", len(*run.Status.Result), run.Status.ResultTruncated)
	}
	h.waitEvent("nolog", "Warning/EventLogUnread")
}

func TestSidecarNeverTerminates(t *testing.T) {
	h := newHarness(t)
	h.createRun("stuck", nil)
	pod := h.startPod(h.job("stuck"))
	end := anEnd(strings.Repeat("y", 9000))
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(end), false))
	h.consistently("waiting for the sidecar", 300*time.Millisecond, func() string {
		if isTerminal(h.get("stuck").Status) {
			return "harvested before the wait ran out"
		}
		return ""
	})
	h.clock.Step(2 * time.Minute) // past Graces.EventLog
	h.poke("stuck")
	run := h.phaseIs("stuck", v1alpha1.PhaseSucceeded)
	if !run.Status.ResultTruncated || h.logs.readCount() != 0 {
		t.Errorf("truncated %v, log reads %d", run.Status.ResultTruncated, h.logs.readCount())
	}
}

// poke triggers a reconcile by touching the AgentRun.
func (h *harness) poke(name string) {
	h.t.Helper()
	run := h.get(name)
	h.modify(run, false, func() {
		if run.Annotations == nil {
			run.Annotations = map[string]string{}
		}
		run.Annotations["test/poke"] = time.Now().String()
	})
}

func TestFailuresWithoutSummary(t *testing.T) {
	h := newHarness(t)
	type story struct {
		name       string
		act        func(job *batchv1.Job)
		wantReason string
		wantDetail string
	}
	stories := []story{
		{"oom", func(job *batchv1.Job) {
			pod := h.startPod(job)
			h.setStatus(pod, agentExited(h.clock.Now(), 137, "OOMKilled", "", true))
		}, v1alpha1.ReasonOOMKilled, "memory limit"},
		{"crash", func(job *batchv1.Job) {
			pod := h.startPod(job)
			h.setStatus(pod, agentExited(h.clock.Now(), 2, "Error", "", true))
		}, v1alpha1.ReasonNoSummary, "exited with code 2"},
		{"deadline", func(job *batchv1.Job) {
			h.modify(job, true, func() {
				job.Status.StartTime = ptr.To(metav1.NewTime(h.clock.Now()))
				job.Status.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, LastTransitionTime: metav1.NewTime(h.clock.Now())},
					{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded,
						Message: "Job was active longer than specified deadline", LastTransitionTime: metav1.NewTime(h.clock.Now())}}
				job.Status.Failed = 1
			})
		}, v1alpha1.ReasonDeadlineExceeded, "activeDeadlineSeconds (4200s)"},
		{"badimage", func(job *batchv1.Job) {
			pod := h.startPod(job)
			h.setStatus(pod, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodPending
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.AgentContainer, Image: "nope",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "InvalidImageName", Message: `couldn't parse image name "nope:"`}}}}
			})
		}, v1alpha1.ReasonImagePullFailed, "InvalidImageName"},
		{"unschedulable", func(job *batchv1.Job) {
			pod := h.startPod(job)
			h.setStatus(pod, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodPending
				s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					Message: "0/1 nodes are available: 1 Insufficient memory.", LastTransitionTime: metav1.NewTime(h.clock.Now().Add(-time.Hour))}}
			})
		}, v1alpha1.ReasonUnschedulable, "Insufficient memory"},
	}
	for _, s := range stories {
		h.createRun(s.name, nil)
	}
	for _, s := range stories {
		t.Run(s.name, func(t *testing.T) {
			s.act(h.job(s.name))
			run := h.phaseIs(s.name, v1alpha1.PhaseFailed)
			c := succeeded(run)
			if c.Status != metav1.ConditionFalse || c.Reason != s.wantReason || !strings.Contains(run.Status.Detail, s.wantDetail) {
				t.Errorf("Succeeded %s/%s, detail %q; want %s with %q", c.Status, c.Reason, run.Status.Detail, s.wantReason, s.wantDetail)
			}
			if run.Status.EndStatus != events.StatusFailed {
				t.Errorf("endStatus %q", run.Status.EndStatus)
			}
			h.waitEvent(s.name, "Warning/"+s.wantReason)
		})
	}
	// A Job whose Pod never got going is stopped once the failure is in
	// status; one whose agent ran keeps its Pod for `kubectl logs`.
	h.eventually("stuck Jobs deleted", func() string {
		for _, name := range []string{"badimage", "unschedulable"} {
			job := &batchv1.Job{}
			err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, job)
			if err == nil && job.DeletionTimestamp == nil {
				return "Job " + name + " still there"
			}
		}
		return ""
	})
	job := &batchv1.Job{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "oom"}, job); err != nil || job.DeletionTimestamp != nil {
		t.Errorf("the Job of a run whose agent ended must stay: %v", err)
	}
}

func TestImagePullGraceWithInjectedClock(t *testing.T) {
	h := newHarness(t)
	h.createRun("pull", nil)
	pod := h.startPod(h.job("pull"))
	h.setStatus(pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodPending
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.AgentContainer, Image: "agentrun-runner:test",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
	})
	h.phaseIs("pull", v1alpha1.PhasePending)
	h.consistently("a pull error gets its grace", 500*time.Millisecond, func() string {
		if run := h.get("pull"); run.Status.Phase != v1alpha1.PhasePending {
			return "phase " + string(run.Status.Phase)
		}
		return ""
	})
	h.clock.Step(h.graces.Startup + time.Minute)
	h.poke("pull")
	run := h.phaseIs("pull", v1alpha1.PhaseFailed)
	if c := succeeded(run); c.Reason != v1alpha1.ReasonImagePullFailed {
		t.Errorf("reason %s", c.Reason)
	}
}

// TestPodRejected: the Job controller reports a Pod the API server refused
// only as FailedCreate Events on the Job (envtest has no Job controller, so
// the test records them as it does). The run says so while it waits, with
// the refusal, and fails after the start-up grace.
func TestPodRejected(t *testing.T) {
	h := newHarness(t)
	h.createRun("refused", nil)
	job := h.job("refused")
	h.phaseIs("refused", v1alpha1.PhasePending)
	msg := `Error creating: pods "refused-x7k2p" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "host")`
	now := metav1.NewTime(h.clock.Now())
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "refused.1", Namespace: h.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: h.ns, Name: job.Name, UID: job.UID},
		Reason:         "FailedCreate", Message: msg, Type: corev1.EventTypeWarning, Count: 3,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "job-controller"}}
	// Another Job's refusal, and another reason of this Job's, must not count.
	other := ev.DeepCopy()
	other.Name, other.InvolvedObject.UID, other.Message = "other.1", "0d0f6c9e-0000-4000-8000-000000000000", "not this run"
	unrelated := ev.DeepCopy()
	unrelated.Name, unrelated.Reason, unrelated.Message = "refused.2", "SuccessfulCreate", "Created pod"
	for _, e := range []*corev1.Event{other, unrelated} {
		if err := h.c.Create(h.ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	h.poke("refused")
	h.consistently("another Job's or reason's Events are not a refusal", 300*time.Millisecond, func() string {
		if c := meta.FindStatusCondition(h.get("refused").Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return "stalled: " + c.Message
		}
		return ""
	})
	// The refusal's Event alone wakes the run: nothing polls it.
	if err := h.c.Create(h.ctx, ev); err != nil {
		t.Fatal(err)
	}
	h.eventually("PodRejected reported", func() string {
		run := h.get("refused")
		c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionStalled)
		if run.Status.Phase != v1alpha1.PhasePending || c == nil || c.Reason != v1alpha1.ReasonPodRejected || !strings.Contains(c.Message, "violates PodSecurity") {
			return fmt.Sprintf("phase %s, Stalled %+v", run.Status.Phase, c)
		}
		return ""
	})
	h.waitEvent("refused", "Warning/PodRejected")
	if got := h.kstatusOf("refused"); got != kstatus.FailedStatus {
		t.Errorf("kstatus %s: a rejected run is stuck, which kstatus calls Failed", got)
	}

	// The grace counts from the Job's creation (the API server's clock,
	// a little after the fake clock's start) at the earliest.
	h.clock.Step(h.graces.Startup + time.Minute)
	h.poke("refused")
	run := h.phaseIs("refused", v1alpha1.PhaseFailed)
	if c := succeeded(run); c.Reason != v1alpha1.ReasonPodRejected || !strings.Contains(run.Status.Detail, "violates PodSecurity") {
		t.Errorf("Succeeded %s: %s", c.Reason, run.Status.Detail)
	}
}

func TestPodDeletedBeforeHarvest(t *testing.T) {
	h := newHarness(t)
	h.createRun("vanish", nil)
	pod := h.startPod(h.job("vanish"))
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("vanish", v1alpha1.PhaseRunning)

	// A plain delete only marks the Pod: the harvest finalizer keeps it.
	if err := h.c.Delete(h.ctx, pod); err != nil {
		t.Fatal(err)
	}
	cur, ok := h.podExists(pod)
	if !ok || cur.DeletionTimestamp == nil {
		t.Fatal("the harvest finalizer must keep a deleted Pod until its result is in")
	}
	// Someone strips the finalizers (a force delete): the Pod vanishes.
	h.modify(cur, false, func() { cur.Finalizers = nil })
	h.eventually("pod gone", func() string {
		if _, ok := h.podExists(pod); ok {
			return "still there"
		}
		return ""
	})
	run := h.phaseIs("vanish", v1alpha1.PhaseFailed)
	c := succeeded(run)
	if c.Reason != v1alpha1.ReasonPodVanished || c.Status != metav1.ConditionFalse || run.Status.Result != nil {
		t.Errorf("a vanished Pod must give a failure saying so, never an empty success: %+v", c)
	}
	h.waitEvent("vanish", "Warning/PodVanished")
}

func TestDeletedPodStillHarvested(t *testing.T) {
	h := newHarness(t)
	h.createRun("deleted", nil)
	pod := h.startPod(h.job("deleted"))
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("deleted", v1alpha1.PhaseRunning)
	if err := h.c.Delete(h.ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The kubelet stops the agent, which ends as interrupted and writes its
	// summary; the Pod is still there to read it.
	e := anEnd("partial answer")
	e.Status, e.ExitCode = events.StatusInterrupted, nil
	h.setStatus(pod, agentExited(h.clock.Now(), 130, "Error", message(e), true))
	run := h.phaseIs("deleted", v1alpha1.PhaseFailed)
	if c := succeeded(run); c.Reason != v1alpha1.ReasonPodDeleted || *run.Status.Result != "partial answer" ||
		!strings.HasPrefix(run.Status.Detail, "the Pod was deleted at ") || run.Status.EndStatus != events.StatusInterrupted {
		t.Errorf("condition %+v result %v detail %q", c, run.Status.Result, run.Status.Detail)
	}
	h.eventually("pod released (only the Job controller's finalizer left)", func() string {
		p, ok := h.podExists(pod)
		if ok && len(p.Finalizers) != 1 {
			return fmt.Sprintf("finalizers %v", p.Finalizers)
		}
		return ""
	})
}

func TestJobDeletedUnderRun(t *testing.T) {
	h := newHarness(t)
	h.createRun("nojob", nil)
	job := h.job("nojob")
	h.phaseIs("nojob", v1alpha1.PhasePending)
	if err := h.c.Delete(h.ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	run := h.phaseIs("nojob", v1alpha1.PhaseFailed)
	if c := succeeded(run); c.Reason != v1alpha1.ReasonJobDeleted {
		t.Errorf("reason %s", c.Reason)
	}
	h.consistently("no new Job for an ended run", 500*time.Millisecond, func() string {
		if n := h.jobCount(); n != 0 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
}

func TestControllerRestartMidRun(t *testing.T) {
	h := newHarness(t)
	h.createRun("restart", nil)
	pod := h.startPod(h.job("restart"))
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("restart", v1alpha1.PhaseRunning)

	// The controller goes away; the run ends while nobody watches.
	h.stopController()
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(anEnd("finished while the controller was down")), true))
	h.start()

	run := h.phaseIs("restart", v1alpha1.PhaseSucceeded)
	if *run.Status.Result != "finished while the controller was down" || run.Status.PodName != pod.Name {
		t.Errorf("status %+v", run.Status)
	}
	if n := h.jobCount(); n != 1 {
		t.Errorf("%d Jobs after the restart", n)
	}
}

func TestRestartAdoptsExistingJob(t *testing.T) {
	h := newHarness(t)
	h.stopController()
	run := h.createRun("adopt", nil)
	// An earlier controller created the Job but died before writing status.
	if err := h.c.Create(h.ctx, BuildJob(run, JobConfig{RunnerImage: "agentrun-runner:test"})); err != nil {
		t.Fatal(err)
	}
	h.start()
	run = h.phaseIs("adopt", v1alpha1.PhasePending)
	h.eventually("jobName recorded", func() string {
		if run = h.get("adopt"); run.Status.JobName != "adopt" {
			return "jobName " + run.Status.JobName
		}
		return ""
	})
	if n := h.jobCount(); n != 1 {
		t.Errorf("%d Jobs", n)
	}
}

func TestStatusNeverRegresses(t *testing.T) {
	h := newHarness(t)
	h.createRun("final", nil)
	pod := h.startPod(h.job("final"))
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(anEnd("first")), true))
	before := h.phaseIs("final", v1alpha1.PhaseSucceeded)

	// Whatever happens to the Pod afterwards, the harvested end stays.
	e := anEnd("second")
	e.Status = events.StatusFailed
	h.setStatus(pod, agentExited(h.clock.Now(), 1, "Error", message(e), true))
	h.poke("final")
	h.consistently("status unchanged", time.Second, func() string {
		run := h.get("final")
		if run.Status.Phase != v1alpha1.PhaseSucceeded || *run.Status.Result != "first" ||
			!run.Status.CompletionTime.Equal(before.Status.CompletionTime) || succeeded(run).Reason != "Finished" {
			return fmt.Sprintf("status changed: %+v", run.Status)
		}
		return ""
	})
}

// TestTTLRemovesJobKeepsRecord: spec.retention.jobTTLAfterEnd deletes the
// Job (and with it the Pod) once it has passed; the AgentRun stays with its
// status, so a GitOps tool has nothing to re-create and nothing runs again.
func TestTTLRemovesJobKeepsRecord(t *testing.T) {
	h := newHarness(t)
	h.createRun("ttl", func(s *v1alpha1.AgentRunSpec) { s.Retention = &v1alpha1.Retention{JobTTLAfterEnd: "10m"} })
	job := h.job("ttl")
	pod := h.startPod(job)
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(anEnd("bye")), true))
	ended := h.phaseIs("ttl", v1alpha1.PhaseSucceeded)
	h.consistently("the Job is kept until the TTL", 500*time.Millisecond, func() string {
		if n := h.jobCount(); n != 1 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
	h.clock.Step(11 * time.Minute)
	h.poke("ttl")
	h.eventually("Job deleted", func() string {
		cur := &batchv1.Job{}
		err := h.c.Get(h.ctx, client.ObjectKeyFromObject(job), cur)
		if isNotFound(err) || (err == nil && cur.DeletionTimestamp != nil) {
			return ""
		}
		return fmt.Sprintf("still there: %v", err)
	})
	h.waitEvent("ttl", "Normal/JobRemoved: spec.retention.jobTTLAfterEnd (10m) has passed")
	h.poke("ttl")
	h.consistently("the AgentRun stays with its record, and nothing runs again", time.Second, func() string {
		run := &v1alpha1.AgentRun{}
		if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "ttl"}, run); err != nil || run.DeletionTimestamp != nil {
			return fmt.Sprintf("the AgentRun is going: %v", err)
		}
		st := run.Status
		if st.Phase != v1alpha1.PhaseSucceeded || *st.Result != "bye" || *st.Usage.TotalTokens != *ended.Status.Usage.TotalTokens ||
			!st.CompletionTime.Equal(ended.Status.CompletionTime) || succeeded(run).Reason != "Finished" {
			return fmt.Sprintf("status changed: %+v", st)
		}
		if n := h.jobCount(); n != 0 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
}

// cancel sets spec.stop, as a user (or a GitOps tool) would.
func (h *harness) cancel(name string) {
	h.t.Helper()
	run := h.get(name)
	h.modify(run, false, func() { run.Spec.Stop = v1alpha1.StopGraceful })
}

// kstatusOf computes the run's kstatus (what Flux and kpt read) from the
// object as the API server returns it.
func (h *harness) kstatusOf(name string) kstatus.Status {
	h.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("AgentRun"))
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, u); err != nil {
		h.t.Fatal(err)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Status
}

func conditionIs(run *v1alpha1.AgentRun, typ string) string {
	c := meta.FindStatusCondition(run.Status.Conditions, typ)
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}

// TestCancelRunning: spec.stop on a running run deletes its Pod (the
// kubelet's SIGTERM makes the agent end as interrupted and write its
// summary); the harvest keeps the partial usage and result, the run ends
// Failed with reason Cancelled, and the record stays. `kubectl wait` on the
// Ended condition returns for it, and kstatus reads it as Failed.
func TestCancelRunning(t *testing.T) {
	h := newHarness(t)
	h.createRun("cancel", nil)
	job := h.job("cancel")
	pod := h.startPod(job)
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("cancel", v1alpha1.PhaseRunning)
	if s := h.kstatusOf("cancel"); s != kstatus.InProgressStatus {
		t.Errorf("kstatus of a running run: %s", s)
	}

	h.cancel("cancel")
	h.eventually("the Pod is being deleted", func() string {
		cur, ok := h.podExists(pod)
		if !ok || cur.DeletionTimestamp == nil {
			return "not deleting"
		}
		return ""
	})
	h.waitEvent("cancel", "Normal/Cancelling: spec.stop is set: stopping the agent in Pod "+pod.Name)
	if run := h.get("cancel"); run.Status.Phase != v1alpha1.PhaseRunning {
		t.Errorf("phase %s while the agent stops: it runs until it has written its end", run.Status.Phase)
	}

	// The kubelet stops the agent; agentrun ends it as interrupted with
	// what it had so far.
	e := anEnd("partial answer")
	e.Status, e.ExitCode = events.StatusInterrupted, nil
	h.setStatus(pod, agentExited(h.clock.Now(), 130, "Error", message(e), true))
	run := h.phaseIs("cancel", v1alpha1.PhaseFailed)
	st := run.Status
	if st.EndStatus != events.StatusInterrupted || *st.Result != "partial answer" || st.Usage == nil || *st.Usage.InputTokens != 18234 ||
		!strings.HasPrefix(st.Detail, "cancelled (spec.stop): the agent was stopped at ") {
		t.Errorf("status %+v", st)
	}
	for typ, want := range map[string]string{v1alpha1.ConditionSucceeded: "False/Cancelled", v1alpha1.ConditionEnded: "True/Cancelled",
		v1alpha1.ConditionStalled: "True/Cancelled", v1alpha1.ConditionReady: "False/Cancelled", v1alpha1.ConditionReconciling: "False/Ended"} {
		if got := conditionIs(run, typ); got != want {
			t.Errorf("%s = %s, want %s", typ, got, want)
		}
	}
	if st.ObservedGeneration != run.Generation || run.Generation != 2 {
		t.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, run.Generation)
	}
	h.waitEvent("cancel", "Normal/Cancelled")
	if s := h.kstatusOf("cancel"); s != kstatus.FailedStatus {
		t.Errorf("kstatus of a cancelled run: %s", s)
	}
	kubectl := kubectl(t)
	if _, errOut, err := kubectl.Run("wait", "--for=condition=Ended", "-n", h.ns, "agentrun/cancel", "--timeout=10s"); err != nil {
		b, _ := io.ReadAll(errOut)
		t.Errorf("kubectl wait --for=condition=Ended on a cancelled run: %v: %s", err, b)
	}
	// The Pod is released; the Job stays (kubectl logs job/...).
	h.eventually("harvest finalizer released", func() string {
		if p, ok := h.podExists(pod); ok && slices.Contains(p.Finalizers, HarvestFinalizer) {
			return "still there"
		}
		return ""
	})
	if n := h.jobCount(); n != 1 {
		t.Errorf("%d Jobs after the cancel, want the one, kept for its log", n)
	}
}

// TestCancelQueued: a run whose Job is still suspended by a queue is
// cancelled without starting: its Job goes at once, it ends interrupted /
// Cancelled with no start time and no usage.
func TestCancelQueued(t *testing.T) {
	h := newHarness(t)
	h.createRun("queued", func(s *v1alpha1.AgentRunSpec) {
		s.PodOverrides = &v1alpha1.PodOverrides{Labels: map[string]string{KueueQueueLabel: "agents"}}
	})
	h.job("queued")
	h.phaseIs("queued", v1alpha1.PhaseQueued)
	if s := h.kstatusOf("queued"); s != kstatus.InProgressStatus {
		t.Errorf("kstatus of a queued run: %s", s)
	}
	h.cancel("queued")
	run := h.phaseIs("queued", v1alpha1.PhaseFailed)
	st := run.Status
	if st.EndStatus != events.StatusInterrupted || conditionIs(run, v1alpha1.ConditionSucceeded) != "False/Cancelled" ||
		!strings.Contains(st.Detail, "while queued") || st.StartTime != nil || st.Usage != nil || st.CompletionTime == nil {
		t.Errorf("status %+v", st)
	}
	h.eventually("the Job is gone", func() string {
		if n := h.jobCount(); n != 0 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
	h.consistently("no Job again", 500*time.Millisecond, func() string {
		if n := h.jobCount(); n != 0 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
}

// TestCancelBeforeJob: a run created cancelled (or cancelled before the
// controller saw it) never gets a Job.
func TestCancelBeforeJob(t *testing.T) {
	h := newHarness(t)
	h.stopController()
	h.createRun("never", func(s *v1alpha1.AgentRunSpec) { s.Stop = v1alpha1.StopGraceful })
	h.start()
	run := h.phaseIs("never", v1alpha1.PhaseFailed)
	if conditionIs(run, v1alpha1.ConditionEnded) != "True/Cancelled" || !strings.Contains(run.Status.Detail, "before its Job was created") ||
		run.Status.JobName != "" {
		t.Errorf("status %+v", run.Status)
	}
	h.consistently("no Job", 500*time.Millisecond, func() string {
		if n := h.jobCount(); n != 0 {
			return fmt.Sprintf("%d Jobs", n)
		}
		return ""
	})
}

// TestCancelAfterEnd: spec.stop on a run that has ended changes nothing
// but the generation the status reports, so health tools read the run as
// before instead of waiting for a generation nobody will observe.
func TestCancelAfterEnd(t *testing.T) {
	h := newHarness(t)
	h.createRun("over", nil)
	pod := h.startPod(h.job("over"))
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(anEnd("done")), true))
	before := h.phaseIs("over", v1alpha1.PhaseSucceeded)
	if s := h.kstatusOf("over"); s != kstatus.CurrentStatus {
		t.Errorf("kstatus of a succeeded run: %s", s)
	}
	h.cancel("over")
	h.eventually("generation 2 observed", func() string {
		if run := h.get("over"); run.Status.ObservedGeneration != 2 {
			return fmt.Sprintf("observedGeneration %d", run.Status.ObservedGeneration)
		}
		return ""
	})
	run := h.get("over")
	if !statusEqual(run.Status, before.Status) || *run.Status.Result != "done" {
		t.Errorf("the ended status changed:\n%+v\n%+v", before.Status, run.Status)
	}
	if s := h.kstatusOf("over"); s != kstatus.CurrentStatus {
		t.Errorf("kstatus after the cancel: %s", s)
	}
	if _, ok := h.podExists(pod); !ok {
		t.Error("the Pod of an ended run was deleted for a cancel")
	}
}

func TestDeletedRunReleasesItsPods(t *testing.T) {
	h := newHarness(t)
	run := h.createRun("gone", nil)
	pod := h.startPod(h.job("gone"))
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs("gone", v1alpha1.PhaseRunning)
	if err := h.c.Delete(h.ctx, run); err != nil {
		t.Fatal(err)
	}
	// No garbage collector in envtest: the Pod is deleted by hand, as the
	// collector would after the Job.
	if err := h.c.Delete(h.ctx, pod); err != nil {
		t.Fatal(err)
	}
	h.eventually("harvest finalizer released", func() string {
		p, ok := h.podExists(pod)
		if !ok {
			return ""
		}
		for _, f := range p.Finalizers {
			if f == HarvestFinalizer {
				return "finalizer still there"
			}
		}
		return ""
	})
}

// TestSecondPodAfterEndStopsJob: a Job that starts a second Pod after the
// run ended (a queue suspended and resumed it) is deleted, so the agent
// does not run again unobserved.
func TestSecondPodAfterEndStopsJob(t *testing.T) {
	h := newHarness(t)
	h.createRun("again", nil)
	job := h.job("again")
	first := h.startPod(job)
	e := anEnd("stopped")
	e.Status = events.StatusInterrupted
	h.setStatus(first, agentExited(h.clock.Now(), 130, "Error", message(e), true))
	h.phaseIs("again", v1alpha1.PhaseFailed)
	h.consistently("the Job of an ended run stays while nothing else runs", 300*time.Millisecond, func() string {
		cur := &batchv1.Job{}
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(job), cur); err != nil || cur.DeletionTimestamp != nil {
			return fmt.Sprintf("Job gone: %v", err)
		}
		return ""
	})
	second := job.DeepCopy()
	second.Name = "again-second" // startPod appends its suffix to this name
	h.startPod(second)
	h.eventually("Job deleted", func() string {
		cur := &batchv1.Job{}
		err := h.c.Get(h.ctx, client.ObjectKeyFromObject(job), cur)
		if isNotFound(err) || (err == nil && cur.DeletionTimestamp != nil) {
			return ""
		}
		return "Job still there"
	})
}
