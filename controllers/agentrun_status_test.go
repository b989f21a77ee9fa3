package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/podcontract"
)

var t0 = time.Date(2026, 10, 4, 13, 0, 0, 0, time.UTC)

// Builders for the objects the table tests observe.

func testJob(edit func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: batchv1.JobSpec{
		Suspend: ptr.To(false), ActiveDeadlineSeconds: ptr.To[int64](4200)}}
	if edit != nil {
		edit(j)
	}
	return j
}

func jobFailed(reason string, at time.Time) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed,
			Status: corev1.ConditionTrue, Reason: reason, Message: "job says " + reason, LastTransitionTime: metav1.NewTime(at)})
	}
}

func testPod(edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r-abcde", CreationTimestamp: metav1.NewTime(t0)}}
	if edit != nil {
		edit(p)
	}
	return p
}

func agentRunning(p *corev1.Pod) {
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.AgentContainer,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(time.Second))}}}}
}

// deletedAt marks a Pod deleted at requested with a grace period of grace
// seconds, as the API server does: deletionTimestamp is when that ends.
func deletedAt(requested time.Time, grace int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp = ptr.To(metav1.NewTime(requested.Add(time.Duration(grace) * time.Second)))
		p.DeletionGracePeriodSeconds = ptr.To(grace)
	}
}

func agentTerminated(code int32, reason, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.AgentContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: message,
				StartedAt: metav1.NewTime(t0.Add(time.Second)), FinishedAt: metav1.NewTime(t0.Add(time.Minute))}}}}
	}
}

func waiting(container, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: container,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: reason + " details"}}})
	}
}

func unschedulable(since time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available", LastTransitionTime: metav1.NewTime(since)}}
	}
}

func endSummary(status string, result string) *podcontract.Summary {
	in, out := int64(1200), int64(80)
	cost := 0.0125
	u := events.TokenCounts{InputTokens: &in, OutputTokens: &out, CostUSD: &cost}
	s := podcontract.FromEnd(&events.End{Status: status, ExitCode: ptr.To(0), DurationMs: 59000, Result: &result,
		Usage: events.Totals{TokenCounts: u, ByModel: map[string]events.TokenCounts{"claude-sonnet-5-5": u}}},
		aggregator.Counters{Tools: 3, ToolErrors: 1})
	return &s
}

func TestComputeOutcome(t *testing.T) {
	g := Graces{Startup: 5 * time.Minute, Unschedulable: 10 * time.Minute, Deletion: 2 * time.Minute, EventLog: time.Minute, SandboxProfile: time.Minute}
	profileMissing := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.AgentContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CreateContainerError", Message: `failed to generate seccomp spec opts: cannot load seccomp profile "/var/lib/kubelet/seccomp/agentrun/bwrap.json": open /var/lib/kubelet/seccomp/agentrun/bwrap.json: no such file or directory`}}}}
	}
	unavailable := endSummary(events.StatusFailed, "")
	unavailable.Detail = "the sandbox failed before the agent started: bubblewrap cannot create its namespaces (No permissions to creating new namespace)"
	unavailable.Isolation = &podcontract.Isolation{Sandbox: "bubblewrap", NetworkMode: "full", Unavailable: true}
	rejection := &refusal{Message: `pods "r-abcde" is forbidden: violates PodSecurity "restricted:latest"`, Since: t0}
	tests := []struct {
		name       string
		obs        observation
		wantReason string // "" = no outcome yet
		wantStatus string
		wantDetail string
		wantWait   time.Duration
	}{
		{name: "no job yet", obs: observation{}},
		{name: "agent running", obs: observation{Job: testJob(nil), Pod: testPod(agentRunning)}},
		{name: "finished with a summary", obs: observation{Job: testJob(nil),
			Pod: testPod(agentTerminated(0, "Completed", "")), Summary: endSummary(events.StatusFinished, "done")},
			wantReason: "Finished", wantStatus: events.StatusFinished},
		{name: "timeout with a summary", obs: observation{Job: testJob(nil),
			Pod: testPod(agentTerminated(124, "Error", "")), Summary: endSummary(events.StatusTimeout, "")},
			wantReason: "Timeout", wantStatus: events.StatusTimeout},
		{name: "interrupted by the Job deadline", obs: observation{Job: testJob(jobFailed(batchv1.JobReasonDeadlineExceeded, t0)),
			Pod: testPod(agentTerminated(130, "Error", "")), Summary: endSummary(events.StatusInterrupted, "")},
			wantReason: v1alpha1.ReasonDeadlineExceeded, wantStatus: events.StatusInterrupted, wantDetail: "activeDeadlineSeconds (4200s)"},
		{name: "OOM-killed without a summary", obs: observation{Job: testJob(nil),
			Pod: testPod(agentTerminated(137, "OOMKilled", "")), SummaryErr: errors.New("empty summary")},
			wantReason: v1alpha1.ReasonOOMKilled, wantStatus: events.StatusFailed, wantDetail: "exceeding its memory limit"},
		{name: "killed by the deadline without a summary", obs: observation{Job: testJob(jobFailed(batchv1.JobReasonDeadlineExceeded, t0)),
			Pod: testPod(agentTerminated(137, "Error", ""))},
			wantReason: v1alpha1.ReasonDeadlineExceeded, wantStatus: events.StatusFailed},
		{name: "crashed without a summary", obs: observation{Job: testJob(nil),
			Pod: testPod(agentTerminated(2, "Error", "panic: boom")), SummaryErr: errors.New("not an agentrun end summary")},
			wantReason: v1alpha1.ReasonNoSummary, wantStatus: events.StatusFailed, wantDetail: "exited with code 2 (Error) without an end summary: not an agentrun"},
		{name: "pod vanished", obs: observation{Job: testJob(nil), PodGone: true},
			wantReason: v1alpha1.ReasonPodVanished, wantStatus: events.StatusFailed, wantDetail: "deleted before"},
		{name: "job deleted", obs: observation{JobGone: true},
			wantReason: v1alpha1.ReasonJobDeleted, wantStatus: events.StatusFailed},
		{name: "evicted", obs: observation{Job: testJob(nil), Pod: testPod(func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "node low on memory"
		})}, wantReason: v1alpha1.ReasonEvicted, wantStatus: events.StatusFailed, wantDetail: "node low on memory"},
		{name: "image pull error within grace", obs: observation{Now: t0.Add(time.Minute), Job: testJob(nil),
			Pod: testPod(waiting(podcontract.AgentContainer, "ImagePullBackOff"))}, wantWait: 4 * time.Minute},
		{name: "image pull error after grace", obs: observation{Now: t0.Add(6 * time.Minute), Job: testJob(nil),
			Pod: testPod(waiting(podcontract.AgentContainer, "ErrImagePull"))},
			wantReason: v1alpha1.ReasonImagePullFailed, wantStatus: events.StatusFailed, wantDetail: "container agent cannot start: ErrImagePull"},
		{name: "invalid image name fails at once", obs: observation{Now: t0, Job: testJob(nil),
			Pod: testPod(waiting(podcontract.EventsContainer, "InvalidImageName"))},
			wantReason: v1alpha1.ReasonImagePullFailed, wantStatus: events.StatusFailed, wantDetail: "container events"},
		{name: "missing secret after grace", obs: observation{Now: t0.Add(time.Hour), Job: testJob(nil),
			Pod: testPod(waiting(podcontract.AgentContainer, "CreateContainerConfigError"))},
			wantReason: v1alpha1.ReasonContainerConfigError, wantStatus: events.StatusFailed},
		// The sandbox cannot run on the node: fail closed, say why.
		{name: "seccomp profile missing, within its grace", obs: observation{Now: t0.Add(20 * time.Second), Job: testJob(nil),
			Pod: testPod(profileMissing)}, wantWait: 40 * time.Second},
		{name: "seccomp profile missing", obs: observation{Now: t0.Add(2 * time.Minute), Job: testJob(nil), Pod: testPod(profileMissing)},
			wantReason: v1alpha1.ReasonSandboxUnavailable, wantStatus: events.StatusFailed, wantDetail: "cannot load seccomp profile"},
		{name: "AppArmor refused by the kubelet", obs: observation{Job: testJob(nil), Pod: testPod(func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host"
		})}, wantReason: v1alpha1.ReasonSandboxUnavailable, wantStatus: events.StatusFailed, wantDetail: "sandboxProfiles.appArmor.enabled"},
		{name: "the runner could not build the sandbox", obs: observation{Job: testJob(nil),
			Pod: testPod(agentTerminated(1, "Error", "")), Summary: unavailable},
			wantReason: v1alpha1.ReasonSandboxUnavailable, wantStatus: events.StatusFailed, wantDetail: "No permissions to creating new namespace"},
		{name: "a missing Secret is not a sandbox matter", obs: observation{Now: t0.Add(2 * time.Minute), Job: testJob(nil),
			Pod: testPod(waiting(podcontract.AgentContainer, "CreateContainerConfigError"))}, wantWait: 3 * time.Minute},

		// The Job cannot create the Pod.
		{name: "pod rejected, within grace", obs: observation{Now: t0.Add(time.Minute), Job: testJob(nil), Rejection: rejection},
			wantWait: 4 * time.Minute},
		{name: "pod rejected too long", obs: observation{Now: t0.Add(5 * time.Minute), Job: testJob(nil), Rejection: rejection},
			wantReason: v1alpha1.ReasonPodRejected, wantStatus: events.StatusFailed, wantDetail: `for 5m0s; the Job controller reported: pods "r-abcde" is forbidden: violates PodSecurity`},

		{name: "unschedulable within grace", obs: observation{Now: t0.Add(time.Minute), Job: testJob(nil),
			Pod: testPod(unschedulable(t0))}, wantWait: 9 * time.Minute},
		{name: "unschedulable too long", obs: observation{Now: t0.Add(11 * time.Minute), Job: testJob(nil),
			Pod: testPod(unschedulable(t0))},
			wantReason: v1alpha1.ReasonUnschedulable, wantStatus: events.StatusFailed, wantDetail: "0/3 nodes are available"},
		{name: "deadline exceeded, pod gone", obs: observation{Now: t0, Job: testJob(jobFailed(batchv1.JobReasonDeadlineExceeded, t0))},
			wantReason: v1alpha1.ReasonDeadlineExceeded, wantStatus: events.StatusFailed},
		{name: "deadline exceeded, agent still stopping", obs: observation{Now: t0.Add(10 * time.Second),
			Job: testJob(jobFailed(batchv1.JobReasonDeadlineExceeded, t0)), Pod: testPod(agentRunning)},
			wantWait: 30*time.Second + 2*time.Minute - 10*time.Second},
		{name: "deadline exceeded, agent never stopped", obs: observation{Now: t0.Add(time.Hour),
			Job: testJob(jobFailed(batchv1.JobReasonDeadlineExceeded, t0)), Pod: testPod(agentRunning)},
			wantReason: v1alpha1.ReasonDeadlineExceeded, wantStatus: events.StatusFailed},
		{name: "pod deleted, agent never ended", obs: observation{Now: t0.Add(time.Hour), Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentRunning(p)
				deletedAt(t0, 30)(p)
			})}, wantReason: v1alpha1.ReasonPodDeleted, wantStatus: events.StatusFailed, wantDetail: "deleted at 2026-10-04T13:00:00Z"},
		{name: "pod deleted, agent stopping", obs: observation{Now: t0.Add(time.Second), Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentRunning(p)
				deletedAt(t0, 30)(p)
			})}, wantWait: 30*time.Second + 2*time.Minute - time.Second},
		{name: "deleted pod that wrote its summary is harvested", obs: observation{Now: t0.Add(time.Hour), Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentTerminated(130, "Error", "")(p)
				deletedAt(t0, 30)(p)
			}), Summary: endSummary(events.StatusInterrupted, "")},
			wantReason: v1alpha1.ReasonPodDeleted, wantStatus: events.StatusInterrupted, wantDetail: "the Pod was deleted at 2026-10-04T13:00:00Z and its agent was stopped"},
		{name: "pod deleted after its agent finished", obs: observation{Now: t0.Add(time.Hour), Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentTerminated(0, "Completed", "")(p)
				deletedAt(t0, 30)(p)
			}), Summary: endSummary(events.StatusFinished, "done")},
			wantReason: "Finished", wantStatus: events.StatusFinished},
		{name: "interrupted by a person, the Pod still there", obs: observation{Job: testJob(nil),
			Pod: testPod(agentTerminated(130, "Error", "")), Summary: endSummary(events.StatusInterrupted, "")},
			wantReason: "Interrupted", wantStatus: events.StatusInterrupted},

		// spec.stop.
		{name: "cancelled before its Job was created", obs: observation{Cancel: true},
			wantReason: v1alpha1.ReasonCancelled, wantStatus: events.StatusInterrupted, wantDetail: "before its Job was created"},
		{name: "cancelled while queued", obs: observation{Cancel: true, Job: testJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })},
			wantReason: v1alpha1.ReasonCancelled, wantStatus: events.StatusInterrupted, wantDetail: "while queued"},
		{name: "cancelled while its Pod pulls the image", obs: observation{Cancel: true, Job: testJob(nil),
			Pod: testPod(waiting(podcontract.AgentContainer, "ContainerCreating"))},
			wantReason: v1alpha1.ReasonCancelled, wantStatus: events.StatusInterrupted, wantDetail: "before the agent started"},
		{name: "cancelled while queued, the Job already deleted for it", obs: observation{Cancel: true, JobGone: true},
			wantReason: v1alpha1.ReasonCancelled, wantStatus: events.StatusInterrupted, wantDetail: "before the agent started"},
		{name: "cancelled while the agent runs: wait for its end", obs: observation{Cancel: true, Started: true, Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentRunning(p)
				deletedAt(t0, 30)(p)
			})}, wantWait: 30*time.Second + 2*time.Minute - time.Minute},
		{name: "cancelled, the agent stopped with its summary", obs: observation{Cancel: true, Started: true, Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentTerminated(130, "Error", "")(p)
				deletedAt(t0, 30)(p)
			}), Summary: endSummary(events.StatusInterrupted, "partial")},
			wantReason: v1alpha1.ReasonCancelled, wantStatus: events.StatusInterrupted, wantDetail: "cancelled (spec.stop): the agent was stopped at 2026-10-04T13:00:00Z"},
		{name: "cancelled, but the agent finished first", obs: observation{Cancel: true, Started: true, Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentTerminated(0, "Completed", "")(p)
				deletedAt(t0, 30)(p)
			}), Summary: endSummary(events.StatusFinished, "done")},
			wantReason: "Finished", wantStatus: events.StatusFinished},
		{name: "cancelled, but the Job deadline stopped it", obs: observation{Cancel: true, Started: true,
			Job: testJob(jobFailed(batchv1.JobReasonDeadlineExceeded, t0)),
			Pod: testPod(agentTerminated(130, "Error", "")), Summary: endSummary(events.StatusInterrupted, "")},
			wantReason: v1alpha1.ReasonDeadlineExceeded, wantStatus: events.StatusInterrupted},
		{name: "cancelled, the agent never reported an end", obs: observation{Now: t0.Add(time.Hour), Cancel: true, Started: true, Job: testJob(nil),
			Pod: testPod(func(p *corev1.Pod) {
				agentRunning(p)
				deletedAt(t0, 30)(p)
			})}, wantReason: v1alpha1.ReasonCancelled, wantStatus: events.StatusFailed, wantDetail: "never reported an end"},
		{name: "cancelled after it started, its Pod vanished", obs: observation{Cancel: true, Started: true, Job: testJob(nil), PodGone: true},
			wantReason: v1alpha1.ReasonPodVanished, wantStatus: events.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.obs.Now.IsZero() {
				tt.obs.Now = t0.Add(time.Minute)
			}
			oc, wait := computeOutcome(tt.obs, g)
			if tt.wantReason == "" {
				if oc != nil {
					t.Fatalf("outcome %+v, want none yet", oc)
				}
				if wait != tt.wantWait {
					t.Errorf("wait %v, want %v", wait, tt.wantWait)
				}
				return
			}
			if oc == nil {
				t.Fatalf("no outcome, want %s", tt.wantReason)
			}
			if oc.Reason != tt.wantReason || oc.EndStatus != tt.wantStatus || !strings.Contains(oc.Detail, tt.wantDetail) {
				t.Errorf("outcome = %s/%s %q; want %s/%s containing %q", oc.EndStatus, oc.Reason, oc.Detail, tt.wantStatus, tt.wantReason, tt.wantDetail)
			}
		})
	}
}

func TestComputeStatusHarvest(t *testing.T) {
	long := strings.Repeat("é", maxStatusResultBytes) // twice the bound in bytes
	cut := endSummary(events.StatusFinished, long)
	cut.Result, cut.ResultCut = ptr.To(long[:1000]), true
	cut.Detail, cut.DetailCut = "partial", true
	full := &events.End{Status: events.StatusFinished, Result: ptr.To("the whole answer"), Detail: "",
		Usage: events.Totals{ByModel: map[string]events.TokenCounts{}}}
	pod := testPod(agentTerminated(0, "Completed", ""))
	isolated := endSummary(events.StatusFinished, "done")
	isolated.Isolation = &podcontract.Isolation{Sandbox: "bubblewrap", NetworkMode: "custom", NetworkEnforced: true}
	unavailable := endSummary(events.StatusFailed, "")
	unavailable.Isolation = &podcontract.Isolation{Sandbox: "bubblewrap", NetworkMode: "full", Unavailable: true}
	tests := []struct {
		name      string
		obs       observation
		check     func(t *testing.T, st v1alpha1.AgentRunStatus)
		wantPhase v1alpha1.Phase
	}{
		{name: "the isolation that ran", obs: observation{Pod: pod, Summary: isolated}, wantPhase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, st v1alpha1.AgentRunStatus) {
				want := v1alpha1.Isolation{Sandbox: v1alpha1.SandboxBubblewrap, NetworkMode: v1alpha1.NetworkCustom, NetworkEnforced: true}
				if st.Isolation == nil || *st.Isolation != want {
					t.Errorf("isolation %+v, want %+v", st.Isolation, want)
				}
			}},
		{name: "no isolation ran: none reported", obs: observation{Pod: testPod(agentTerminated(1, "Error", "")), Summary: unavailable},
			wantPhase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, st v1alpha1.AgentRunStatus) {
				if st.Isolation != nil {
					t.Errorf("isolation %+v for a sandbox that could not be built", st.Isolation)
				}
			}},
		{name: "summary", obs: observation{Pod: pod, Summary: endSummary(events.StatusFinished, "done")}, wantPhase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, st v1alpha1.AgentRunStatus) {
				u := st.Usage
				if *st.Result != "done" || st.ResultTruncated || u.CostUSD != "0.0125" || *u.TotalTokens != 1280 ||
					u.ByModel["claude-sonnet-5-5"].CostUSD != "0.0125" || st.Counters.Tools != 3 || st.Counters.ToolErrors != 1 ||
					*st.DurationMs != 59000 || *st.ExitCode != 0 || st.EndStatus != "finished" || !st.CompletionTime.Time.Equal(t0.Add(time.Minute)) {
					t.Errorf("status = %+v, usage %+v", st, u)
				}
			}},
		{name: "cut summary, log read", obs: observation{Pod: pod, Summary: cut, LogEnd: full}, wantPhase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, st v1alpha1.AgentRunStatus) {
				if *st.Result != "the whole answer" || st.ResultTruncated || st.Detail != "" {
					t.Errorf("result %q truncated %v detail %q", *st.Result, st.ResultTruncated, st.Detail)
				}
			}},
		{name: "cut summary, log unreadable", obs: observation{Pod: pod, Summary: cut, LogErr: errors.New("forbidden")}, wantPhase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, st v1alpha1.AgentRunStatus) {
				if len(*st.Result) != 1000 || !st.ResultTruncated || !strings.Contains(st.Detail, "[cut") {
					t.Errorf("result %d bytes truncated %v detail %q", len(*st.Result), st.ResultTruncated, st.Detail)
				}
			}},
		{name: "log result over the status bound", obs: observation{Pod: pod, Summary: cut,
			LogEnd: &events.End{Status: events.StatusFinished, Result: &long}}, wantPhase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, st v1alpha1.AgentRunStatus) {
				if len(*st.Result) > maxStatusResultBytes || !st.ResultTruncated || !strings.HasPrefix(long, *st.Result) {
					t.Errorf("result %d bytes, truncated %v", len(*st.Result), st.ResultTruncated)
				}
			}},
		{name: "no summary: duration from the container", obs: observation{Pod: pod}, wantPhase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, st v1alpha1.AgentRunStatus) {
				if *st.DurationMs != 59000 || *st.ExitCode != 0 || st.Usage != nil || st.EndStatus != "failed" {
					t.Errorf("status = %+v", st)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Now = t0.Add(2 * time.Minute)
			tt.obs.Job = testJob(nil)
			oc, _ := computeOutcome(tt.obs, DefaultGraces)
			st := computeStatus(v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}, 1, tt.obs, oc)
			if st.Phase != tt.wantPhase {
				t.Fatalf("phase %s, want %s", st.Phase, tt.wantPhase)
			}
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSucceeded)
			want := metav1.ConditionTrue
			if tt.wantPhase == v1alpha1.PhaseFailed {
				want = metav1.ConditionFalse
			}
			if c == nil || c.Status != want || c.Reason != oc.Reason || c.ObservedGeneration != 1 {
				t.Errorf("Succeeded condition = %+v", c)
			}
			tt.check(t, st)
		})
	}
}

func TestComputeStatusNeverRegresses(t *testing.T) {
	ended := computeStatus(v1alpha1.AgentRunStatus{}, 1,
		observation{Now: t0.Add(2 * time.Minute), Job: testJob(nil), Pod: testPod(agentTerminated(0, "Completed", "")),
			Summary: endSummary(events.StatusFinished, "done")},
		&outcome{EndStatus: events.StatusFinished, Reason: "Finished", Completion: t0.Add(time.Minute), FromSummary: true})
	running := computeStatus(v1alpha1.AgentRunStatus{}, 1,
		observation{Now: t0.Add(time.Minute), Job: testJob(nil), Pod: testPod(agentRunning)}, nil)

	tests := []struct {
		name string
		old  v1alpha1.AgentRunStatus
		obs  observation
		oc   *outcome
		want v1alpha1.Phase
	}{
		{"ended stays ended whatever is seen", ended, observation{Now: t0.Add(time.Hour), PodGone: true},
			&outcome{EndStatus: events.StatusFailed, Reason: v1alpha1.ReasonPodVanished}, v1alpha1.PhaseSucceeded},
		{"ended stays ended when the Pod runs again", ended, observation{Now: t0.Add(time.Hour), Job: testJob(nil), Pod: testPod(agentRunning)},
			nil, v1alpha1.PhaseSucceeded},
		{"running does not go back to pending", running, observation{Now: t0.Add(time.Hour), Job: testJob(nil)}, nil, v1alpha1.PhaseRunning},
		{"running does not go back to queued", running, observation{Now: t0.Add(time.Hour),
			Job: testJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })}, nil, v1alpha1.PhaseRunning},
		{"pending may become queued", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending}, observation{Now: t0,
			Job: testJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })}, nil, v1alpha1.PhaseQueued},
		{"queued may become pending (admitted)", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseQueued}, observation{Now: t0,
			Job: testJob(nil)}, nil, v1alpha1.PhasePending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := computeStatus(tt.old, 2, tt.obs, tt.oc)
			if st.Phase != tt.want {
				t.Fatalf("phase %s, want %s", st.Phase, tt.want)
			}
			if isTerminal(tt.old) && !statusEqual(st, tt.old) {
				t.Errorf("an ended status changed:\n%+v\n%+v", tt.old, st)
			}
			// Every status reports the generation it has seen, an ended one
			// too (spec.stop set after the end bumps it).
			if st.ObservedGeneration != 2 {
				t.Errorf("observedGeneration %d, want 2", st.ObservedGeneration)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 2 {
					t.Errorf("condition %s has observedGeneration %d", c.Type, c.ObservedGeneration)
				}
			}
			if tt.old.StartTime != nil && (st.StartTime == nil || !st.StartTime.Equal(tt.old.StartTime)) {
				t.Error("startTime changed")
			}
			if tt.old.PodName != "" && st.PodName != tt.old.PodName {
				t.Error("podName changed")
			}
		})
	}
}

// statusEqual compares what an ended status must keep: all but the
// generation it reports.
func statusEqual(a, b v1alpha1.AgentRunStatus) bool {
	if a.Phase != b.Phase || a.EndStatus != b.EndStatus || a.Detail != b.Detail ||
		len(a.Conditions) != len(b.Conditions) || !a.CompletionTime.Equal(b.CompletionTime) {
		return false
	}
	for _, c := range a.Conditions {
		o := meta.FindStatusCondition(b.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message || !o.LastTransitionTime.Equal(&c.LastTransitionTime) {
			return false
		}
	}
	return true
}

// TestEndedByOlderManager: a run that ended under a manager that wrote only
// Succeeded and Running gets the other conditions from its Succeeded
// reason, so health tools read it right after an upgrade.
func TestEndedByOlderManager(t *testing.T) {
	old := v1alpha1.AgentRunStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseFailed, EndStatus: "failed", Detail: "killed",
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionSucceeded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonOOMKilled, Message: "end status failed: killed",
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1alpha1.ConditionRunning, Status: metav1.ConditionFalse, Reason: "Ended", Message: "the run has ended",
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)},
		}}
	st := computeStatus(old, 1, observation{Now: t0.Add(time.Hour)}, nil)
	want := map[string]string{
		v1alpha1.ConditionSucceeded: "False/OOMKilled", v1alpha1.ConditionEnded: "True/OOMKilled", v1alpha1.ConditionReady: "False/OOMKilled",
		v1alpha1.ConditionStalled: "True/OOMKilled", v1alpha1.ConditionReconciling: "False/Ended", v1alpha1.ConditionRunning: "False/Ended",
	}
	for typ, w := range want {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || string(c.Status)+"/"+c.Reason != w {
			t.Errorf("%s = %+v, want %s", typ, c, w)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSucceeded); !c.LastTransitionTime.Time.Equal(t0) {
		t.Error("the Succeeded condition moved")
	}
}

func TestComputeConditions(t *testing.T) {
	// Each row: the phase and outcome, then Succeeded, Ended, Running,
	// Ready, Reconciling, Stalled as status/reason.
	tests := []struct {
		phase v1alpha1.Phase
		oc    *outcome
		want  [6]string
	}{
		{v1alpha1.PhasePending, nil, [6]string{"Unknown/Pending", "False/Pending", "False/Pending", "False/Pending", "True/Pending", "False/Pending"}},
		{v1alpha1.PhaseQueued, nil, [6]string{"Unknown/Queued", "False/Queued", "False/Queued", "False/Queued", "True/Queued", "False/Queued"}},
		{v1alpha1.PhaseRunning, nil, [6]string{"Unknown/Running", "False/Running", "True/Running", "False/Running", "True/Running", "False/Running"}},
		{v1alpha1.PhaseSucceeded, &outcome{Reason: "Finished"},
			[6]string{"True/Finished", "True/Finished", "False/Ended", "True/Finished", "False/Ended", "False/Finished"}},
		{v1alpha1.PhaseFailed, &outcome{Reason: "Limit"},
			[6]string{"False/Limit", "True/Limit", "False/Ended", "False/Limit", "False/Ended", "True/Limit"}},
		{v1alpha1.PhaseFailed, &outcome{Reason: v1alpha1.ReasonOOMKilled},
			[6]string{"False/OOMKilled", "True/OOMKilled", "False/Ended", "False/OOMKilled", "False/Ended", "True/OOMKilled"}},
		{v1alpha1.PhaseFailed, &outcome{Reason: v1alpha1.ReasonCancelled},
			[6]string{"False/Cancelled", "True/Cancelled", "False/Ended", "False/Cancelled", "False/Ended", "True/Cancelled"}},
	}
	types := [6]string{v1alpha1.ConditionSucceeded, v1alpha1.ConditionEnded, v1alpha1.ConditionRunning,
		v1alpha1.ConditionReady, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled}
	for _, tt := range tests {
		t.Run(string(tt.phase)+"/"+tt.want[0], func(t *testing.T) {
			conds := computeConditions(nil, v1alpha1.AgentRunStatus{Phase: tt.phase, EndStatus: "limit", Detail: "--max-turns 3 reached"}, tt.oc, nil, 4, t0)
			if len(conds) != len(types) {
				t.Errorf("%d conditions, want %d", len(conds), len(types))
			}
			for i, typ := range types {
				c := meta.FindStatusCondition(conds, typ)
				if c == nil {
					t.Errorf("no %s condition", typ)
					continue
				}
				if got := string(c.Status) + "/" + c.Reason; got != tt.want[i] {
					t.Errorf("%s = %s, want %s", typ, got, tt.want[i])
				}
				if c.ObservedGeneration != 4 || !c.LastTransitionTime.Time.Equal(t0) || c.Message == "" {
					t.Errorf("%s: generation %d time %v message %q", typ, c.ObservedGeneration, c.LastTransitionTime, c.Message)
				}
			}
		})
	}
	// The transition time moves only when the status does.
	first := computeConditions(nil, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, PodName: "p"}, nil, nil, 1, t0)
	again := computeConditions(first, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, PodName: "p"}, nil, nil, 1, t0.Add(time.Hour))
	if !meta.FindStatusCondition(again, v1alpha1.ConditionRunning).LastTransitionTime.Time.Equal(t0) {
		t.Error("lastTransitionTime moved without a transition")
	}
	long := computeConditions(nil, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, EndStatus: "failed", Detail: strings.Repeat("x", 5000)},
		&outcome{Reason: "Failed"}, nil, 1, t0)
	for _, c := range long {
		if len(c.Message) > maxConditionMessageBytes+len("…") {
			t.Errorf("%s message of %d bytes", c.Type, len(c.Message))
		}
	}
}

// TestPodRejectedIsReported: a run whose Job cannot create its Pod is
// Pending and Stalled with the API server's refusal, and gets one Warning
// Event per refusal message.
func TestPodRejectedIsReported(t *testing.T) {
	r1 := &refusal{Message: `pods "r-1" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes`, Since: t0}
	obs := observation{Now: t0.Add(time.Minute), Job: testJob(nil), Rejection: r1}
	st := computeStatus(v1alpha1.AgentRunStatus{}, 1, obs, nil)
	if st.Phase != v1alpha1.PhasePending {
		t.Fatalf("phase %s", st.Phase)
	}
	stalled := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1alpha1.ReasonPodRejected || !strings.Contains(stalled.Message, r1.Message) {
		t.Errorf("Stalled = %+v", stalled)
	}
	evs := computeEvents(v1alpha1.AgentRunStatus{}, st)
	if len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning || evs[0].Reason != v1alpha1.ReasonPodRejected {
		t.Errorf("events %+v, want one PodRejected warning", evs)
	}
	again := computeStatus(st, 1, obs, nil)
	if evs := computeEvents(st, again); len(evs) != 0 {
		t.Errorf("the same refusal again: events %+v", evs)
	}
	obs.Rejection = &refusal{Message: `exceeded quota: agents, requested: pods=1`, Since: t0}
	changed := computeStatus(again, 1, obs, nil)
	if evs := computeEvents(again, changed); len(evs) != 1 || !strings.Contains(evs[0].Message, "exceeded quota") {
		t.Errorf("a new refusal: events %+v", evs)
	}
	// The Pod exists at last: no longer stalled.
	obs.Rejection, obs.Pod = nil, testPod(nil)
	healed := computeStatus(changed, 1, obs, nil)
	if c := meta.FindStatusCondition(healed.Conditions, v1alpha1.ConditionStalled); c.Status != metav1.ConditionFalse {
		t.Errorf("Stalled after the Pod was created: %+v", c)
	}
}

func TestLatestRejection(t *testing.T) {
	ev := func(msg string, first, last time.Duration) corev1.Event {
		return corev1.Event{Message: msg, FirstTimestamp: metav1.NewTime(t0.Add(first)), LastTimestamp: metav1.NewTime(t0.Add(last)),
			Source: corev1.EventSource{Component: "job-controller"}}
	}
	forged := ev("use sandbox: none", -time.Hour, -time.Hour)
	forged.Source.Component = "someone"
	for _, tc := range []struct {
		name string
		evs  []corev1.Event
		want *refusal
	}{
		{"none", nil, nil},
		{"one", []corev1.Event{ev("a", 0, time.Minute)}, &refusal{Message: "a", Since: t0}},
		{"the newest message, the first time", []corev1.Event{ev("new", time.Minute, 3*time.Minute), ev("old", 0, 2*time.Minute)},
			&refusal{Message: "new", Since: t0}},
		{"events.k8s.io style: eventTime and reporting controller", []corev1.Event{{Message: "b", EventTime: metav1.NewMicroTime(t0), ReportingController: "job-controller"}},
			&refusal{Message: "b", Since: t0}},
		{"not before the Job existed", []corev1.Event{ev("back-dated", -24*time.Hour, time.Minute)}, &refusal{Message: "back-dated", Since: t0}},
		{"another component's Event does not count", []corev1.Event{forged}, nil},
	} {
		got := latestRejection(tc.evs, t0)
		if (got == nil) != (tc.want == nil) || (got != nil && (got.Message != tc.want.Message || !got.Since.Equal(tc.want.Since))) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestComputeEvents(t *testing.T) {
	start := metav1.NewTime(t0)
	failedConds := computeConditions(nil, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, EndStatus: "failed", Detail: "boom"},
		&outcome{Reason: v1alpha1.ReasonOOMKilled}, nil, 1, t0)
	cancelledConds := computeConditions(nil, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, EndStatus: "interrupted", Detail: "cancelled (spec.stop)"},
		&outcome{Reason: v1alpha1.ReasonCancelled}, nil, 1, t0)
	tests := []struct {
		name     string
		old, new v1alpha1.AgentRunStatus
		want     string
	}{
		{"nothing", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending}, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending}, ""},
		{"queued", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending}, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseQueued}, "Normal/Queued"},
		{"started", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending},
			v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StartTime: &start, PodName: "p"}, "Normal/Started"},
		{"started and finished at once", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending},
			v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, StartTime: &start, DurationMs: ptr.To[int64](1500),
				Usage: &v1alpha1.Usage{TotalTokens: ptr.To[int64](10), TokenCounts: v1alpha1.TokenCounts{CostUSD: "0.01"}}},
			"Normal/Started Normal/Finished"},
		{"failed", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StartTime: &start},
			v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, StartTime: &start, Conditions: failedConds}, "Warning/OOMKilled"},
		{"cancelled", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StartTime: &start},
			v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, StartTime: &start, Conditions: cancelledConds}, "Normal/Cancelled"},
		{"already ended", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, StartTime: &start, Conditions: failedConds},
			v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, StartTime: &start, Conditions: failedConds}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range computeEvents(tt.old, tt.new) {
				got = append(got, e.Type+"/"+e.Reason)
				if e.Message == "" {
					t.Errorf("%s without a message", e.Reason)
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
	evs := computeEvents(v1alpha1.AgentRunStatus{}, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, Conditions: failedConds})
	if !strings.Contains(evs[0].Message, "boom") {
		t.Errorf("the failed event must carry the detail: %q", evs[0].Message)
	}
}

func TestCostString(t *testing.T) {
	a, b := 0.1, 0.2 // variables: a constant 0.1 + 0.2 is folded to exactly 0.3
	tests := []struct {
		in   *float64
		want string
	}{
		{nil, ""},
		{ptr.To(0.0), "0"},
		{ptr.To(0.0436916), "0.0436916"},
		{ptr.To(1e-9), "0.000000001"},
		{ptr.To(12.5), "12.5"},
		{ptr.To(a + b), "0.30000000000000004"},
	}
	for _, tt := range tests {
		if got := costString(tt.in); got != tt.want {
			t.Errorf("costString = %q, want %q", got, tt.want)
		}
	}
}

func TestStatusUsage(t *testing.T) {
	if u := statusUsage(events.Totals{ByModel: map[string]events.TokenCounts{}}); u.TotalTokens != nil || u.ByModel != nil || u.CostUSD != "" {
		t.Errorf("a run without usage: %+v", u)
	}
	in := int64(5)
	u := statusUsage(events.Totals{TokenCounts: events.TokenCounts{InputTokens: &in},
		ByModel: map[string]events.TokenCounts{"unknown": {InputTokens: &in}}})
	if *u.TotalTokens != 5 || *u.ByModel["unknown"].InputTokens != 5 || u.OutputTokens != nil {
		t.Errorf("usage %+v", u)
	}
	in = 6
	if *u.InputTokens != 5 {
		t.Error("status usage shares memory with the end event")
	}
}

func TestParseLogEnd(t *testing.T) {
	end := `{"schema":1,"type":"end","time":"2026-10-04T13:00:31.250Z","status":"finished","exit_code":0,"detail":"","duration_ms":5,` +
		`"usage":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":null,"cache_write_tokens":null,"cost_usd":null,"by_model":{}},"result":"all of it","session_id":null}`
	tests := []struct {
		name, log, wantErr string
	}{
		{"end is the last line", `{"schema":1,"type":"text","time":"x","parent":null,"text":"hi"}` + "\n" + end + "\n", ""},
		{"one line without newline", end, ""},
		{"CRLF", end + "\r\n", ""},
		{"empty", "", "empty"},
		{"not an end event", `{"schema":1,"type":"text","time":"x","parent":null,"text":"hi"}` + "\n", "does not end with an end event"},
		{"cut line", end[:100], "last line of the event log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := parseLogEnd([]byte(tt.log))
			if tt.wantErr == "" {
				if err != nil || *e.Result != "all of it" {
					t.Fatalf("parseLogEnd = %+v, %v", e, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
