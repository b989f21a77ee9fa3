package controllers

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// podRefusals selects the Events the manager caches: the Job controller's
// FailedCreate on a Job, which is how it reports a Pod the API server
// refused. Only those: the cache holds no other Event of the cluster.
var podRefusals = fields.SelectorFromSet(fields.Set{"involvedObject.kind": "Job", "reason": "FailedCreate"})

// refusalJobUID is the index of the cached refusals by their Job's UID.
const refusalJobUID = "involvedObject.uid"

// indexRefusals indexes the cached refusals by their Job's UID.
func indexRefusals(ctx context.Context, idx client.FieldIndexer) error {
	return idx.IndexField(ctx, &corev1.Event{}, refusalJobUID, func(o client.Object) []string {
		if e, ok := o.(*corev1.Event); ok && e.InvolvedObject.UID != "" {
			return []string{string(e.InvolvedObject.UID)}
		}
		return nil
	})
}

// refusalToRun wakes the run whose Job a refusal is about: the Job's
// controller, read from the cache (anyone who may create Events can name
// any Job; only a Job of an AgentRun, with the Event's UID, leads to one).
func (r *AgentRunReconciler) refusalToRun(ctx context.Context, o client.Object) []reconcile.Request {
	e, ok := o.(*corev1.Event)
	if !ok || e.InvolvedObject.Name == "" {
		return nil
	}
	job := &batchv1.Job{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.InvolvedObject.Name}, job); err != nil || job.UID != e.InvolvedObject.UID {
		return nil
	}
	for _, ref := range job.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "AgentRun" && ref.APIVersion == v1alpha1.GroupVersion.String() {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: job.Namespace, Name: ref.Name}}}
		}
	}
	return nil
}

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
	var list corev1.EventList
	err := r.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingFields{refusalJobUID: string(job.UID)})
	if err != nil {
		return err
	}
	// No poll: a refusal is recorded (and counted again) as an Event the
	// cache watches, which wakes the run (refusalToRun), and the grace it
	// gets is a computed wake-up (computeOutcome). A 10 s poll of every
	// Pod-less run was 2,000 reconciles a second for a backlog of 20,000
	// runs (hack/scale-bench -n 10000).
	s.obs.Rejection = latestRejection(list.Items, job.CreationTimestamp.Time)
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
