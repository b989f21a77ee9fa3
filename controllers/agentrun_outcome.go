package controllers

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
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
	// Patch is what the harvest did with the run's patch (spec.git push
	// mode Patch, a change published as a patch).
	Patch *patchKept
	// Cancel: spec.stop is set.
	Cancel bool
	// Started: the agent container was seen running before (status has
	// a startTime), even if its Pod is not seen now.
	Started bool
	// Rejection is why the Job cannot create the run's Pod, while it has
	// none (the Job's FailedCreate Events).
	Rejection *refusal
	// JobRefusal is why the API server refuses to create the run's Job,
	// while it may still accept it.
	JobRefusal *refusal
}

// refusal is the API server's refusal of the run's Job or of its Pod.
type refusal struct {
	// Message is the API server's answer (the latest one).
	Message string
	// Since is when the refusals began.
	Since time.Time
}

// neverStarted: the agent container has not been seen running, now or
// before.
func (o observation) neverStarted() bool {
	return !o.Started && containerStarted(o.Pod, podcontract.AgentContainer) == nil
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
	events.StatusFinished:    v1alpha1.ReasonFinished,
	events.StatusFailed:      v1alpha1.ReasonFailed,
	events.StatusInterrupted: v1alpha1.ReasonInterrupted,
	events.StatusTimeout:     v1alpha1.ReasonTimeout,
	events.StatusLimit:       v1alpha1.ReasonLimit,
	events.StatusRejected:    v1alpha1.ReasonRejected,
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
	if t := containerTerminated(o.Pod, podcontract.AgentContainer); t != nil {
		return terminatedOutcome(o, t), 0
	}
	fail := func(reason, detail string) *outcome {
		return &outcome{EndStatus: events.StatusFailed, Reason: reason, Detail: detail, Completion: o.Now}
	}
	if o.Cancel && o.neverStarted() {
		// Nothing ran, so nothing is lost by ending now; the reconciler
		// deletes the Job before this is written, so a queue cannot start
		// it in between.
		return &outcome{EndStatus: events.StatusInterrupted, Reason: v1alpha1.ReasonCancelled, Completion: o.Now,
			Detail: cancelledBeforeStart(o)}, 0
	}
	switch {
	case o.PodGone:
		return fail(v1alpha1.ReasonPodVanished, "the Pod was deleted before the agent's result was read; the run's outcome is unknown"), 0
	case o.JobGone:
		return fail(v1alpha1.ReasonJobDeleted, "the Job was deleted before the run ended"), 0
	}
	var wait waiter
	if r := o.JobRefusal; r != nil && o.Job == nil && wait.until(o.Now, r.Since.Add(g.Startup)) {
		// As for the Pod below: a refusal that may pass gets the grace.
		return fail(v1alpha1.ReasonJobRefused, cutText(fmt.Sprintf("the API server refused to create the run's Job for %s; it answered: %s", g.Startup, r.Message), maxStatusDetailBytes)), 0
	}
	if r := o.Rejection; r != nil && o.Pod == nil && wait.until(o.Now, r.Since.Add(g.Startup)) {
		// Admission refusals do not heal by themselves (someone must
		// change the namespace's labels, a quota or the spec), but a
		// quota freed or a webhook back up does: so a grace, not at once.
		return fail(v1alpha1.ReasonPodRejected, fmt.Sprintf("the Job could not create the run's Pod for %s; the Job controller reported: %s", g.Startup, r.Message)), 0
	}
	if p := o.Pod; p != nil {
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason != "" {
			reason, detail := v1alpha1.ReasonJobFailed, fmt.Sprintf("the Pod failed before the agent ended: %s: %s", p.Status.Reason, p.Status.Message)
			switch p.Status.Reason {
			case "Evicted":
				reason = v1alpha1.ReasonEvicted
			case "AppArmor":
				// The kubelet refuses a Pod whose AppArmor profile it
				// cannot enforce (no AppArmor, or the profile not loaded).
				reason = v1alpha1.ReasonSandboxUnavailable
				detail = fmt.Sprintf("the node cannot run the sandbox: its kubelet refused the Pod (%s: %s); %s",
					p.Status.Reason, p.Status.Message, appArmorFix)
			}
			return fail(reason, detail), 0
		}
		// deletionTimestamp is when the Pod's grace period ends.
		if dt := p.DeletionTimestamp; dt != nil && wait.until(o.Now, dt.Add(g.Deletion)) {
			detail := fmt.Sprintf("the Pod was deleted at %s and its agent never reported an end", deletionRequested(p))
			if o.Cancel {
				return fail(v1alpha1.ReasonCancelled, "cancelled (spec.stop): "+detail), 0
			}
			return fail(v1alpha1.ReasonPodDeleted, detail), 0
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
				return fail(v1alpha1.ReasonDeadlineExceeded, deadlineDetail(o.Job)), 0
			}
			return fail(v1alpha1.ReasonJobFailed, fmt.Sprintf("the Job failed before the agent ended: %s: %s", c.Reason, c.Message)), 0
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
			reason = v1alpha1.ReasonImagePullFailed
		case configReasons[w.Reason] && cs.Name == podcontract.AgentContainer && sandboxProfileError(w.Message):
			if wait.until(o.Now, since.Add(g.SandboxProfile)) {
				return &outcome{EndStatus: events.StatusFailed, Reason: v1alpha1.ReasonSandboxUnavailable, Completion: o.Now,
					Detail: fmt.Sprintf("the node cannot run the sandbox: container %s cannot start: %s: %s; %s",
						cs.Name, w.Reason, w.Message, profileFix(w.Message))}
			}
			continue
		case configReasons[w.Reason]:
			reason = v1alpha1.ReasonContainerConfigError
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
				return &outcome{EndStatus: events.StatusFailed, Reason: v1alpha1.ReasonUnschedulable, Completion: o.Now,
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

// The fixes a SandboxUnavailable detail names (docs/kubernetes/pod-security.md).
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
			oc.Reason = v1alpha1.ReasonFailed
		}
		if s.ExitCode != nil {
			oc.ExitCode = int32Ptr(int32(*s.ExitCode))
		}
		if s.Isolation != nil && s.Isolation.Unavailable {
			// The runner could not build the sandbox on this node; its
			// detail names the cause and the fix.
			oc.Reason = v1alpha1.ReasonSandboxUnavailable
		}
		switch {
		case s.Status != events.StatusInterrupted:
		case deadlineHit:
			// Stopped by the Job's backstop, not by a person.
			oc.Reason, oc.Detail, oc.FromSummary = v1alpha1.ReasonDeadlineExceeded, deadlineDetail(o.Job), false
		case o.Cancel:
			// The controller deleted the Pod for spec.stop: the
			// interruption was asked for, not suffered.
			oc.Reason, oc.FromSummary = v1alpha1.ReasonCancelled, false
			oc.Detail = "cancelled (spec.stop): the agent was stopped"
			if o.Pod != nil && o.Pod.DeletionTimestamp != nil {
				oc.Detail += " at " + deletionRequested(o.Pod)
			}
			oc.Detail += "; usage and result are what it had reached"
		case o.Pod != nil && o.Pod.DeletionTimestamp != nil:
			// The SIGTERM came from the Pod's deletion (kubectl delete, a
			// drain, an API eviction): say so, the agent cannot know.
			oc.Reason, oc.FromSummary = v1alpha1.ReasonPodDeleted, false
			oc.Detail = fmt.Sprintf("the Pod was deleted at %s and its agent was stopped", deletionRequested(o.Pod))
		}
		return oc
	}
	oc := &outcome{EndStatus: events.StatusFailed, ExitCode: int32Ptr(t.ExitCode), Completion: completion}
	msg := firstLine(t.Message, 300)
	switch {
	case t.Reason == "OOMKilled":
		oc.Reason = v1alpha1.ReasonOOMKilled
		oc.Detail = fmt.Sprintf("the agent container was killed for exceeding its memory limit (OOMKilled, exit code %d); raise spec.podOverrides.resources.limits.memory", t.ExitCode)
	case deadlineHit:
		oc.Reason, oc.Detail = v1alpha1.ReasonDeadlineExceeded, deadlineDetail(o.Job)
	case o.Pod != nil && o.Pod.Status.Reason == "Evicted":
		oc.Reason = v1alpha1.ReasonEvicted
		oc.Detail = "the Pod was evicted before the agent ended: " + o.Pod.Status.Message
	default:
		oc.Reason = v1alpha1.ReasonNoSummary
		oc.Detail = fmt.Sprintf("the agent container exited with code %d (%s) without an end summary", t.ExitCode, t.Reason)
		if o.SummaryErr != nil {
			oc.Detail += ": " + o.SummaryErr.Error()
		}
	}
	if msg != "" && oc.Reason != v1alpha1.ReasonNoSummary {
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
		return "cancelled (spec.stop) before its Job was created: the agent never ran"
	case o.Job != nil && o.Job.Spec.Suspend != nil && *o.Job.Spec.Suspend:
		return "cancelled (spec.stop) while queued (its Job was suspended): the agent never ran"
	}
	return "cancelled (spec.stop) before the agent started: the agent never ran"
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
