package controllers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// Condition reasons besides the end statuses (see v1alpha1.ConditionSucceeded).
const (
	ReasonDeadlineExceeded     = "DeadlineExceeded"
	ReasonOOMKilled            = "OOMKilled"
	ReasonImagePullFailed      = "ImagePullFailed"
	ReasonContainerConfigError = "ContainerConfigError"
	ReasonUnschedulable        = "Unschedulable"
	ReasonEvicted              = "Evicted"
	ReasonNoSummary            = "NoSummary"
	ReasonPodVanished          = "PodVanished"
	ReasonPodDeleted           = "PodDeleted"
	ReasonJobDeleted           = "JobDeleted"
	ReasonJobFailed            = "JobFailed"
	// ReasonSandboxUnavailable: the node could not run the bubblewrap
	// sandbox (its seccomp or AppArmor profile missing or too strict,
	// user namespaces disabled); the agent never ran unsandboxed.
	ReasonSandboxUnavailable = "SandboxUnavailable"
	// ReasonPodRejected: the Job could not create the run's Pod (Pod
	// Security admission, a quota, an admission webhook).
	ReasonPodRejected = "PodRejected"
	// ReasonCancelled: spec.cancel stopped the run (end status
	// interrupted), or ended it before its agent started.
	ReasonCancelled = "Cancelled"
	// ReasonEnded is the Running and Reconciling reason of an ended run.
	ReasonEnded = "Ended"
)

// Status bounds. An AgentRun must stay far below etcd's 1.5 MiB object
// limit, and lists of many runs are read at once; the event log keeps the
// whole text.
const (
	maxStatusResultBytes = 32 << 10
	maxStatusDetailBytes = 4 << 10
	// maxConditionMessageBytes keeps `kubectl describe` readable; the
	// whole detail is in status.detail.
	maxConditionMessageBytes = 1 << 10
)

// Graces are how long the controller waits before it calls a Pod that
// cannot start a failure. Image pulls and missing Secrets can heal (a
// registry hiccup, a Secret created a moment later), so they are given
// time; a permanent error (an invalid image name) is not.
type Graces struct {
	// Startup bounds image pull and container configuration errors.
	Startup time.Duration
	// Unschedulable bounds a Pod the scheduler cannot place.
	Unschedulable time.Duration
	// Deletion bounds a deleted Pod whose agent never reports an end
	// (its node is gone): the Pod's grace period plus this.
	Deletion time.Duration
	// EventLog bounds the wait for the events container to terminate
	// before a cut result is read from its log.
	EventLog time.Duration
	// SandboxProfile bounds a container the runtime cannot create for its
	// seccomp or AppArmor profile: on a new node the chart's DaemonSet
	// puts the profiles in place within seconds.
	SandboxProfile time.Duration
}

// DefaultGraces are the manager's defaults. Startup also bounds a Job that
// cannot create its Pod.
var DefaultGraces = Graces{Startup: 5 * time.Minute, Unschedulable: 10 * time.Minute, Deletion: 2 * time.Minute,
	EventLog: time.Minute, SandboxProfile: time.Minute}

// observation is what the controller saw of one run in one reconcile.
type observation struct {
	Now time.Time
	Job *batchv1.Job // nil: no Job (yet, or any more)
	// JobGone: the Job was created (status.jobName) and the API server
	// confirms it no longer exists.
	JobGone bool
	Pod     *corev1.Pod
	// PodGone: the Pod was seen (status.podName) and the API server
	// confirms it no longer exists.
	PodGone bool
	// Summary is the agent container's termination message, decoded.
	Summary    *podcontract.Summary
	SummaryErr error
	// LogEnd is the end event from the events container's log, read when
	// the summary was cut.
	LogEnd *events.End
	LogErr error
	// Cancel: spec.cancel is set.
	Cancel bool
	// Started: the agent container was seen running before (status has
	// a startTime), even if its Pod is not seen now.
	Started bool
	// Rejection is why the Job cannot create the run's Pod, while it has
	// none.
	Rejection *podRejection
}

// podRejection is the Job's FailedCreate Events for a run without a Pod.
type podRejection struct {
	// Message is the API server's refusal, from the latest Event.
	Message string
	// Since is when the Job first failed to create the Pod.
	Since time.Time
}

// neverStarted: the agent container has not been seen running, now or
// before.
func (o observation) neverStarted() bool {
	return !o.Started && containerStarted(o.Pod, AgentContainer) == nil
}

// outcome is how a run ended.
type outcome struct {
	EndStatus  string
	Reason     string
	Detail     string
	ExitCode   *int32
	Completion time.Time
	// FromSummary: the agent wrote its end summary (Detail is its detail).
	FromSummary bool
}

// endReasons are the condition reasons of the end statuses.
var endReasons = map[string]string{
	events.StatusFinished:    "Finished",
	events.StatusFailed:      "Failed",
	events.StatusInterrupted: "Interrupted",
	events.StatusTimeout:     "Timeout",
	events.StatusLimit:       "Limit",
	events.StatusRejected:    "Rejected",
}

// imagePullReasons are the container waiting reasons of an image that
// cannot be pulled; permanentPull ones never heal by waiting.
var (
	imagePullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}
	permanentPull    = map[string]bool{"InvalidImageName": true, "ErrImageNeverPull": true}
	configReasons    = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true}
)

// computeOutcome decides whether the run has ended and how. When it has
// not, it returns how long until a grace it is waiting on runs out (0:
// nothing to wait for but events).
func computeOutcome(o observation, g Graces) (*outcome, time.Duration) {
	if t := containerTerminated(o.Pod, AgentContainer); t != nil {
		return terminatedOutcome(o, t), 0
	}
	fail := func(reason, detail string) *outcome {
		return &outcome{EndStatus: events.StatusFailed, Reason: reason, Detail: detail, Completion: o.Now}
	}
	if o.Cancel && o.neverStarted() {
		// Nothing ran, so nothing is lost by ending now; the reconciler
		// deletes the Job before this is written, so a queue cannot start
		// it in between.
		return &outcome{EndStatus: events.StatusInterrupted, Reason: ReasonCancelled, Completion: o.Now,
			Detail: cancelledBeforeStart(o)}, 0
	}
	switch {
	case o.PodGone:
		return fail(ReasonPodVanished, "the Pod was deleted before the agent's result was read; the run's outcome is unknown"), 0
	case o.JobGone:
		return fail(ReasonJobDeleted, "the Job was deleted before the run ended"), 0
	}
	var wait waiter
	if r := o.Rejection; r != nil && o.Pod == nil && wait.until(o.Now, r.Since.Add(g.Startup)) {
		// Admission refusals do not heal by themselves (someone must
		// change the namespace's labels, a quota or the spec), but a
		// quota freed or a webhook back up does: so a grace, not at once.
		return fail(ReasonPodRejected, fmt.Sprintf("the Job could not create the run's Pod for %s; the Job controller reported: %s", g.Startup, r.Message)), 0
	}
	if p := o.Pod; p != nil {
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason != "" {
			reason, detail := ReasonJobFailed, fmt.Sprintf("the Pod failed before the agent ended: %s: %s", p.Status.Reason, p.Status.Message)
			switch p.Status.Reason {
			case "Evicted":
				reason = ReasonEvicted
			case "AppArmor":
				// The kubelet refuses a Pod whose AppArmor profile it
				// cannot enforce (no AppArmor, or the profile not loaded).
				reason = ReasonSandboxUnavailable
				detail = fmt.Sprintf("the node cannot run the sandbox: its kubelet refused the Pod (%s: %s); %s",
					p.Status.Reason, p.Status.Message, appArmorFix)
			}
			return fail(reason, detail), 0
		}
		// deletionTimestamp is when the Pod's grace period ends.
		if dt := p.DeletionTimestamp; dt != nil && wait.until(o.Now, dt.Add(g.Deletion)) {
			detail := fmt.Sprintf("the Pod was deleted at %s and its agent never reported an end", deletionRequested(p))
			if o.Cancel {
				return fail(ReasonCancelled, "cancelled (spec.cancel): "+detail), 0
			}
			return fail(ReasonPodDeleted, detail), 0
		}
		if oc := startupOutcome(o, g, &wait); oc != nil {
			return oc, 0
		}
	}
	if c := jobCondition(o.Job, batchv1.JobFailed); c != nil {
		// A failed Job stops its Pod; the agent may still write its
		// summary while it terminates, so a Pod that still runs gets its
		// termination grace first.
		if o.Pod == nil || o.Pod.Status.Phase == corev1.PodFailed || o.Pod.Status.Phase == corev1.PodSucceeded ||
			wait.until(o.Now, c.LastTransitionTime.Add(terminationGraceSeconds*time.Second+g.Deletion)) {
			if c.Reason == batchv1.JobReasonDeadlineExceeded {
				return fail(ReasonDeadlineExceeded, deadlineDetail(o.Job)), 0
			}
			return fail(ReasonJobFailed, fmt.Sprintf("the Job failed before the agent ended: %s: %s", c.Reason, c.Message)), 0
		}
	}
	return nil, wait.next
}

// startupOutcome reports a Pod whose containers cannot start: images that
// cannot be pulled, configuration that cannot be built (a missing Secret or
// ConfigMap), or no node to run on.
func startupOutcome(o observation, g Graces, wait *waiter) *outcome {
	p := o.Pod
	since := p.CreationTimestamp.Time
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		var reason string
		switch {
		case imagePullReasons[w.Reason]:
			reason = ReasonImagePullFailed
		case configReasons[w.Reason] && cs.Name == AgentContainer && sandboxProfileError(w.Message):
			if wait.until(o.Now, since.Add(g.SandboxProfile)) {
				return &outcome{EndStatus: events.StatusFailed, Reason: ReasonSandboxUnavailable, Completion: o.Now,
					Detail: fmt.Sprintf("the node cannot run the sandbox: container %s cannot start: %s: %s; %s",
						cs.Name, w.Reason, w.Message, profileFix(w.Message))}
			}
			continue
		case configReasons[w.Reason]:
			reason = ReasonContainerConfigError
		default:
			continue
		}
		if permanentPull[w.Reason] || wait.until(o.Now, since.Add(g.Startup)) {
			return &outcome{EndStatus: events.StatusFailed, Reason: reason, Completion: o.Now,
				Detail: fmt.Sprintf("container %s cannot start: %s: %s", cs.Name, w.Reason, w.Message)}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			from := c.LastTransitionTime.Time
			if from.IsZero() {
				from = since
			}
			if wait.until(o.Now, from.Add(g.Unschedulable)) {
				return &outcome{EndStatus: events.StatusFailed, Reason: ReasonUnschedulable, Completion: o.Now,
					Detail: fmt.Sprintf("the Pod could not be scheduled for %s: %s", g.Unschedulable, c.Message)}
			}
		}
	}
	return nil
}

// sandboxProfileError reports whether the container runtime could not
// create a container for its seccomp or AppArmor profile (a Localhost
// profile missing on the node, say).
func sandboxProfileError(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "seccomp") || strings.Contains(m, "apparmor")
}

// The fixes a SandboxUnavailable detail names (README.md, "Pod Security").
const (
	seccompFix = "install agentrun's node profiles on this node (chart value sandboxProfiles.installer: the DaemonSet " +
		"writes <kubelet root>/seccomp/agentrun/bwrap.json; set sandboxProfiles.kubeletRootDir to the kubelet's --root-dir) " +
		"or keep agent Pods off nodes without them (podOverrides.nodeSelector)"
	appArmorFix = "the agent container's AppArmor profile agentrun-bwrap must be loaded on the node (chart value " +
		"sandboxProfiles.appArmor.enabled, on nodes with AppArmor only; the kubelet refuses AppArmor profiles where AppArmor is off)"
)

// profileFix is the fix for a profile the runtime could not apply.
func profileFix(msg string) string {
	if strings.Contains(strings.ToLower(msg), "apparmor") {
		return appArmorFix
	}
	return seccompFix
}

// terminatedOutcome is the end of a run whose agent container terminated:
// its summary when it wrote one, else what the container state says.
func terminatedOutcome(o observation, t *corev1.ContainerStateTerminated) *outcome {
	completion := t.FinishedAt.Time
	if completion.IsZero() {
		completion = o.Now
	}
	deadline := jobCondition(o.Job, batchv1.JobFailed)
	deadlineHit := deadline != nil && deadline.Reason == batchv1.JobReasonDeadlineExceeded
	if s := o.Summary; s != nil {
		oc := &outcome{EndStatus: s.Status, Reason: endReasons[s.Status], Detail: s.Detail, Completion: completion, FromSummary: true}
		if oc.Reason == "" {
			oc.Reason = "Failed"
		}
		if s.ExitCode != nil {
			oc.ExitCode = int32Ptr(int32(*s.ExitCode))
		}
		if s.Isolation != nil && s.Isolation.Unavailable {
			// The runner could not build the sandbox on this node; its
			// detail names the cause and the fix.
			oc.Reason = ReasonSandboxUnavailable
		}
		switch {
		case s.Status != events.StatusInterrupted:
		case deadlineHit:
			// Stopped by the Job's backstop, not by a person.
			oc.Reason, oc.Detail, oc.FromSummary = ReasonDeadlineExceeded, deadlineDetail(o.Job), false
		case o.Cancel:
			// The controller deleted the Pod for spec.cancel: the
			// interruption was asked for, not suffered.
			oc.Reason, oc.FromSummary = ReasonCancelled, false
			oc.Detail = "cancelled (spec.cancel): the agent was stopped"
			if o.Pod != nil && o.Pod.DeletionTimestamp != nil {
				oc.Detail += " at " + deletionRequested(o.Pod)
			}
			oc.Detail += "; usage and result are what it had reached"
		case o.Pod != nil && o.Pod.DeletionTimestamp != nil:
			// The SIGTERM came from the Pod's deletion (kubectl delete, a
			// drain, an API eviction): say so, the agent cannot know.
			oc.Reason, oc.FromSummary = ReasonPodDeleted, false
			oc.Detail = fmt.Sprintf("the Pod was deleted at %s and its agent was stopped", deletionRequested(o.Pod))
		}
		return oc
	}
	oc := &outcome{EndStatus: events.StatusFailed, ExitCode: int32Ptr(t.ExitCode), Completion: completion}
	msg := firstLine(t.Message, 300)
	switch {
	case t.Reason == "OOMKilled":
		oc.Reason = ReasonOOMKilled
		oc.Detail = fmt.Sprintf("the agent container was killed for exceeding its memory limit (OOMKilled, exit code %d); raise spec.podOverrides.resources.limits.memory", t.ExitCode)
	case deadlineHit:
		oc.Reason, oc.Detail = ReasonDeadlineExceeded, deadlineDetail(o.Job)
	case o.Pod != nil && o.Pod.Status.Reason == "Evicted":
		oc.Reason = ReasonEvicted
		oc.Detail = "the Pod was evicted before the agent ended: " + o.Pod.Status.Message
	default:
		oc.Reason = ReasonNoSummary
		oc.Detail = fmt.Sprintf("the agent container exited with code %d (%s) without an end summary", t.ExitCode, t.Reason)
		if o.SummaryErr != nil {
			oc.Detail += ": " + o.SummaryErr.Error()
		}
	}
	if msg != "" && oc.Reason != ReasonNoSummary {
		oc.Detail += "; termination message: " + msg
	}
	return oc
}

// deletionRequested is when a deleted Pod's deletion was asked for, in
// RFC 3339: its deletionTimestamp is that moment plus the grace period.
func deletionRequested(p *corev1.Pod) string {
	t := p.DeletionTimestamp.Time
	if p.DeletionGracePeriodSeconds != nil {
		t = t.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

// cancelledBeforeStart says where a run cancelled before its agent started
// was stopped.
func cancelledBeforeStart(o observation) string {
	switch {
	case o.Job == nil && !o.JobGone:
		return "cancelled (spec.cancel) before its Job was created: the agent never ran"
	case o.Job != nil && o.Job.Spec.Suspend != nil && *o.Job.Spec.Suspend:
		return "cancelled (spec.cancel) while queued (its Job was suspended): the agent never ran"
	}
	return "cancelled (spec.cancel) before the agent started: the agent never ran"
}

func deadlineDetail(job *batchv1.Job) string {
	d := "the Job's activeDeadlineSeconds"
	if job != nil && job.Spec.ActiveDeadlineSeconds != nil {
		d += fmt.Sprintf(" (%ds)", *job.Spec.ActiveDeadlineSeconds)
	}
	return d + " passed before the agent ended: the run outlived spec.timeout plus the start-up margin and was stopped"
}

// waiter collects the earliest grace deadline still ahead.
type waiter struct{ next time.Duration }

// until reports whether deadline has passed; if not, it remembers how
// long until it does.
func (w *waiter) until(now, deadline time.Time) bool {
	if !now.Before(deadline) {
		return true
	}
	if d := deadline.Sub(now); w.next == 0 || d < w.next {
		w.next = d
	}
	return false
}

// observedPhase is where a run that has not ended is.
func observedPhase(o observation) v1alpha1.Phase {
	switch {
	case o.Job == nil:
		return v1alpha1.PhasePending
	case o.Job.Spec.Suspend != nil && *o.Job.Spec.Suspend:
		return v1alpha1.PhaseQueued
	case containerStarted(o.Pod, AgentContainer) != nil:
		return v1alpha1.PhaseRunning
	}
	return v1alpha1.PhasePending
}

// phaseRank orders phases so that status never goes back.
func phaseRank(p v1alpha1.Phase) int {
	switch p {
	case v1alpha1.PhasePending, v1alpha1.PhaseQueued:
		return 1
	case v1alpha1.PhaseRunning:
		return 2
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed:
		return 3
	}
	return 0
}

// isTerminal reports whether status holds a harvested end.
func isTerminal(st v1alpha1.AgentRunStatus) bool { return phaseRank(st.Phase) == 3 }

// computeStatus is the new status of a run from its old status, what was
// observed and the outcome, if any. It never goes back: an ended run keeps
// its status, a running one does not return to pending, and names and
// times once set stay.
//
// An ended run still reports the generation it has seen (spec.cancel set
// after the end bumps it, and kstatus reads a stale observedGeneration as
// InProgress), and gets any condition an older manager did not write,
// from its Succeeded condition.
func computeStatus(old v1alpha1.AgentRunStatus, generation int64, o observation, oc *outcome) v1alpha1.AgentRunStatus {
	st := *old.DeepCopy()
	if isTerminal(old) {
		st.ObservedGeneration = generation
		st.Conditions = computeConditions(st.Conditions, st, nil, nil, generation, o.Now)
		return st
	}
	st.ObservedGeneration = generation
	if o.Job != nil {
		st.JobName = o.Job.Name
		if st.TraceID == "" {
			st.TraceID = o.Job.Annotations[AnnotationTraceID]
		}
	}
	if o.Pod != nil {
		st.PodName = o.Pod.Name
	}
	if st.StartTime == nil {
		if t := containerStarted(o.Pod, AgentContainer); t != nil {
			st.StartTime = t
		}
	}
	phase := observedPhase(o)
	if oc != nil {
		applyOutcome(&st, o, oc)
		phase = v1alpha1.PhaseFailed
		if oc.EndStatus == events.StatusFinished {
			phase = v1alpha1.PhaseSucceeded
		}
	}
	if phaseRank(phase) < phaseRank(st.Phase) {
		phase = st.Phase
	}
	st.Phase = phase
	var rejected *podRejection
	if oc == nil && o.Pod == nil {
		rejected = o.Rejection
	}
	st.Conditions = computeConditions(st.Conditions, st, oc, rejected, generation, o.Now)
	return st
}

// applyOutcome copies the end into status: the summary's fields, completed
// from the event log's end event where the summary was cut.
func applyOutcome(st *v1alpha1.AgentRunStatus, o observation, oc *outcome) {
	st.EndStatus = oc.EndStatus
	st.ExitCode = oc.ExitCode
	st.CompletionTime = &metav1.Time{Time: oc.Completion}
	detail := oc.Detail
	if s := o.Summary; s != nil {
		st.DurationMs = int64Ptr(s.DurationMs)
		st.Usage = statusUsage(s.Usage)
		st.Usage.ByModelTruncated = s.ByModelCut
		st.Result, st.ResultTruncated = s.Result, s.ResultCut
		if s.SessionID != nil {
			st.SessionID = *s.SessionID
		}
		if iso := s.Isolation; iso != nil && !iso.Unavailable {
			st.Isolation = &v1alpha1.Isolation{Sandbox: iso.Sandbox, NetworkMode: iso.NetworkMode, NetworkEnforced: iso.NetworkEnforced}
		}
		c := s.Counters
		st.Counters = &v1alpha1.Counters{Tools: int32(c.Tools), ToolErrors: int32(c.ToolErrors), Denials: int32(c.Denials),
			Subagents: int32(c.Subagents), DeniedConnections: int32(c.DeniedConnections)}
		if s.DetailCut && oc.FromSummary {
			detail += " [cut; the whole detail is in the event log]"
		}
		if e := o.LogEnd; e != nil {
			st.Usage = statusUsage(e.Usage)
			st.Result, st.ResultTruncated = e.Result, false
			if e.SessionID != nil {
				st.SessionID = *e.SessionID
			}
			if oc.FromSummary {
				detail = e.Detail
			}
		}
	} else if st.StartTime != nil && !oc.Completion.Before(st.StartTime.Time) {
		st.DurationMs = int64Ptr(oc.Completion.Sub(st.StartTime.Time).Milliseconds())
	}
	if st.Result != nil {
		r, cut := podcontract.CutUTF8(*st.Result, maxStatusResultBytes)
		st.Result, st.ResultTruncated = &r, st.ResultTruncated || cut
	}
	if d, cut := podcontract.CutUTF8(detail, maxStatusDetailBytes); cut {
		detail = d + "…"
	}
	st.Detail = detail
}

// computeConditions sets the conditions of status st (see the condition
// types in api/v1alpha1 for their polarity and reasons). The reason of an
// end is the outcome's; without one (an ended run reconciled again) the
// Succeeded condition's, which holds it since the end was written. A run
// whose Job cannot create its Pod (rejected) is Stalled, with the API
// server's refusal, until it gets a Pod or fails.
func computeConditions(conds []metav1.Condition, st v1alpha1.AgentRunStatus, oc *outcome, rejected *podRejection, generation int64, now time.Time) []metav1.Condition {
	out := append([]metav1.Condition{}, conds...)
	ts := metav1.NewTime(now)
	cond := func(t string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&out, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
			ObservedGeneration: generation, LastTransitionTime: ts})
	}
	phase := string(st.Phase)
	switch st.Phase {
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed:
		reason := endReason(conds, st, oc)
		msg := conditionMessage(st)
		ok := st.Phase == v1alpha1.PhaseSucceeded
		cond(v1alpha1.ConditionSucceeded, boolStatus(ok), reason, msg)
		cond(v1alpha1.ConditionEnded, metav1.ConditionTrue, reason, msg)
		cond(v1alpha1.ConditionReady, boolStatus(ok), reason, msg)
		cond(v1alpha1.ConditionStalled, boolStatus(!ok), reason, msg)
		cond(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ReasonEnded, "the run has ended")
		cond(v1alpha1.ConditionRunning, metav1.ConditionFalse, ReasonEnded, "the run has ended")
		return out
	}
	var doing string
	switch st.Phase {
	case v1alpha1.PhaseRunning:
		doing = "the agent runs in Pod " + st.PodName
	case v1alpha1.PhaseQueued:
		doing = "the Job is suspended until a queue (such as Kueue) admits it"
	default:
		phase, doing = string(v1alpha1.PhasePending), "waiting for the agent container to start"
	}
	cond(v1alpha1.ConditionSucceeded, metav1.ConditionUnknown, phase, "the run has not ended")
	cond(v1alpha1.ConditionEnded, metav1.ConditionFalse, phase, "the run has not ended")
	cond(v1alpha1.ConditionReady, metav1.ConditionFalse, phase, "the run has not ended")
	if rejected != nil {
		m, cut := podcontract.CutUTF8("the Job cannot create the run's Pod: "+rejected.Message, maxConditionMessageBytes)
		if cut {
			m += "…"
		}
		cond(v1alpha1.ConditionStalled, metav1.ConditionTrue, ReasonPodRejected, m)
		cond(v1alpha1.ConditionReconciling, metav1.ConditionTrue, ReasonPodRejected, m)
		cond(v1alpha1.ConditionRunning, metav1.ConditionFalse, phase, doing)
		return out
	}
	cond(v1alpha1.ConditionStalled, metav1.ConditionFalse, phase, "the run has not failed")
	cond(v1alpha1.ConditionReconciling, metav1.ConditionTrue, phase, doing)
	cond(v1alpha1.ConditionRunning, boolStatus(st.Phase == v1alpha1.PhaseRunning), phase, doing)
	return out
}

// endReason is the condition reason of an ended run.
func endReason(conds []metav1.Condition, st v1alpha1.AgentRunStatus, oc *outcome) string {
	if oc != nil {
		return oc.Reason
	}
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionSucceeded); c != nil && c.Status != metav1.ConditionUnknown {
		return c.Reason
	}
	if r := endReasons[st.EndStatus]; r != "" {
		return r
	}
	return "Failed"
}

func boolStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

func conditionMessage(st v1alpha1.AgentRunStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "end status %s", st.EndStatus)
	if st.ExitCode != nil {
		fmt.Fprintf(&b, ", exit code %d", *st.ExitCode)
	}
	if st.Detail != "" {
		b.WriteString(": ")
		b.WriteString(st.Detail)
	}
	m, cut := podcontract.CutUTF8(b.String(), maxConditionMessageBytes)
	if cut {
		m += "…"
	}
	return m
}

// event is a Kubernetes Event to record on the AgentRun once the status
// that caused it is written.
type event struct {
	Type, Reason, Message string
}

// computeEvents are the Events of the change from old to new status:
// started, queued, finished and failed with the detail.
func computeEvents(old, st v1alpha1.AgentRunStatus) []event {
	var out []event
	if old.Phase != st.Phase && st.Phase == v1alpha1.PhaseQueued {
		if msg, held := holdDetail(st); held {
			out = append(out, event{corev1.EventTypeNormal, ReasonBudgetExhausted, msg})
		} else {
			out = append(out, event{corev1.EventTypeNormal, "Queued", "the Job " + st.JobName + " is suspended until a queue admits it"})
		}
	}
	if old.StartTime == nil && st.StartTime != nil {
		out = append(out, event{corev1.EventTypeNormal, "Started", "the agent started in Pod " + st.PodName})
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c != nil && c.Reason == ReasonPodRejected && !isTerminal(st) {
		// Once per refusal message: the Job controller retries with
		// backoff, and each retry repeats it.
		if was := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionStalled); was == nil || was.Message != c.Message {
			out = append(out, event{corev1.EventTypeWarning, ReasonPodRejected, c.Message})
		}
	}
	if !isTerminal(old) && isTerminal(st) {
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSucceeded)
		switch {
		case st.Phase == v1alpha1.PhaseSucceeded:
			out = append(out, event{corev1.EventTypeNormal, "Finished", finishedMessage(st)})
		case c.Reason == ReasonCancelled:
			// Asked for, so not a warning.
			out = append(out, event{corev1.EventTypeNormal, c.Reason, c.Message})
		default:
			out = append(out, event{corev1.EventTypeWarning, c.Reason, c.Message})
		}
	}
	return out
}

func finishedMessage(st v1alpha1.AgentRunStatus) string {
	m := "the run finished"
	if st.DurationMs != nil {
		m += fmt.Sprintf(" in %s", (time.Duration(*st.DurationMs) * time.Millisecond).Round(time.Millisecond))
	}
	if u := st.Usage; u != nil {
		if u.TotalTokens != nil {
			m += fmt.Sprintf(", %d tokens", *u.TotalTokens)
		}
		if u.CostUSD != "" {
			m += ", $" + u.CostUSD
		}
	}
	return m
}

// statusUsage is end.usage in status form: cost as a decimal string.
func statusUsage(t events.Totals) *v1alpha1.Usage {
	u := &v1alpha1.Usage{TokenCounts: statusCounts(t.TokenCounts), TotalTokens: totalTokens(t.TokenCounts)}
	if len(t.ByModel) > 0 {
		u.ByModel = make(map[string]v1alpha1.TokenCounts, len(t.ByModel))
		for m, c := range t.ByModel {
			u.ByModel[m] = statusCounts(c)
		}
	}
	return u
}

func statusCounts(c events.TokenCounts) v1alpha1.TokenCounts {
	return v1alpha1.TokenCounts{
		InputTokens: cloneInt64(c.InputTokens), OutputTokens: cloneInt64(c.OutputTokens),
		CacheReadTokens: cloneInt64(c.CacheReadTokens), CacheWriteTokens: cloneInt64(c.CacheWriteTokens),
		CostUSD: costString(c.CostUSD),
	}
}

// costString writes a cost exactly as the float the runtime reported,
// in decimal notation, without rounding; null stays empty.
func costString(c *float64) string {
	if c == nil {
		return ""
	}
	return strconv.FormatFloat(*c, 'f', -1, 64)
}

func totalTokens(c events.TokenCounts) *int64 {
	var n int64
	seen := false
	for _, p := range []*int64{c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			n += *p
			seen = true
		}
	}
	if !seen {
		return nil
	}
	return &n
}

// containerTerminated is the terminated state of a container (regular or
// init) of pod, or nil.
func containerTerminated(pod *corev1.Pod, name string) *corev1.ContainerStateTerminated {
	if cs := containerStatus(pod, name); cs != nil {
		return cs.State.Terminated
	}
	return nil
}

// containerStarted is when a container started, if it has.
func containerStarted(pod *corev1.Pod, name string) *metav1.Time {
	cs := containerStatus(pod, name)
	switch {
	case cs == nil:
		return nil
	case cs.State.Running != nil:
		t := cs.State.Running.StartedAt
		return &t
	case cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero():
		t := cs.State.Terminated.StartedAt
		return &t
	}
	return nil
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	if job == nil {
		return nil
	}
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func firstLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	s, _ = podcontract.CutUTF8(s, n)
	return s
}

func int32Ptr(v int32) *int32 { return &v }
func int64Ptr(v int64) *int64 { return &v }

func cloneInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
