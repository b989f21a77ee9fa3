package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rejectionPoll is how often a run whose Job has no Pod yet looks for the
// Job's FailedCreate Events: a refused Pod changes nothing the manager
// watches (the Job's status stays as it was), so it must look.
const rejectionPoll = 10 * time.Second

// reconcileRejection finds out why a started Job has no Pod: the Job
// controller records each refusal (Pod Security admission, a quota, a
// webhook) only as a FailedCreate Event on the Job, which the AgentRun
// then reports (reason PodRejected) instead of staying silently Pending.
func (r *AgentRunReconciler) reconcileRejection(ctx context.Context, s *scope) error {
	job := s.obs.Job
	if job == nil || s.obs.Pod != nil || s.obs.PodGone || s.run.Status.PodName != "" || s.created ||
		(job.Spec.Suspend != nil && *job.Spec.Suspend) || isTerminal(s.run.Status) {
		return nil
	}
	if s.run.Status.JobName == "" {
		// The Job was created a moment ago (this reconcile writes its
		// name first): the Job controller has had no time to refuse a
		// Pod, and the poll looks soon. A burst of runs would otherwise
		// add one uncached list per run to the API server's load.
		s.requeueAfter(rejectionPoll)
		return nil
	}
	// Events are not cached (the manager would hold every Event of the
	// cluster); this list runs only for runs without a Pod.
	var list corev1.EventList
	err := r.APIReader.List(ctx, &list, client.InNamespace(job.Namespace),
		client.MatchingFields{"involvedObject.uid": string(job.UID), "reason": "FailedCreate"})
	if err != nil {
		return err
	}
	s.obs.Rejection = latestRejection(list.Items, job.CreationTimestamp.Time)
	s.requeueAfter(rejectionPoll)
	return nil
}

// jobController is the component that reports a Job's Pod refusals.
const jobController = "job-controller"

// latestRejection is the refusal the Events report: the newest message,
// since the first time, but never before the Job existed. Only the Job
// controller's Events count, and whoever may create Events in the
// namespace could still write one: the clamp keeps such an Event from
// failing a run before its grace (counted from the Job's creation) is over,
// and the message says where it came from. nil without Events.
func latestRejection(evs []corev1.Event, jobCreated time.Time) *refusal {
	var out *refusal
	var newest time.Time
	for i := range evs {
		e := &evs[i]
		if e.Source.Component != jobController && e.ReportingController != jobController {
			continue
		}
		first, last := e.FirstTimestamp.Time, e.LastTimestamp.Time
		if first.IsZero() {
			first = e.EventTime.Time
		}
		if last.IsZero() {
			last = first
		}
		if first.Before(jobCreated) {
			first = jobCreated
		}
		if out == nil {
			out = &refusal{Message: e.Message, Since: first}
			newest = last
			continue
		}
		if first.Before(out.Since) {
			out.Since = first
		}
		if last.After(newest) {
			out.Message, newest = e.Message, last
		}
	}
	return out
}
