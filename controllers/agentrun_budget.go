package controllers

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// Reasons of the budget and the queue.
// Annotations the manager puts on a Pod it is about to delete to stop its
// agent, so that the end it then harvests says why (a deleted Pod's run
// otherwise ends PodDeleted).
const (
	AnnotationStopReason  = "agentrun.dev/stop-reason"
	AnnotationStopMessage = "agentrun.dev/stop-message"
)

// hold keeps a run from getting its Job.
type hold struct {
	Reason, Message string
}

// spentBudget is the first AgentBudget (by name) that covers run and is
// spent, or nil. A calendar window's status past its end is the last
// window's: it no longer holds anything.
func (r *AgentRunReconciler) spentBudget(ctx context.Context, run *v1alpha1.AgentRun, now time.Time) (*v1alpha1.AgentBudget, error) {
	// The cache's own budgets, not copies (each carries up to 100 runs in
	// its status, and every reconcile of a run that has no Job reads them):
	// they are only read, and the one returned only for its message.
	list := &v1alpha1.AgentBudgetList{}
	if err := r.List(ctx, list, client.InNamespace(run.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil // the AgentBudget CRD is not installed
		}
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		b := &list.Items[i]
		if b.Covers(run) && budgetSpent(b, now) {
			return b, nil
		}
	}
	return nil, nil
}

// budgetSpent reads the budget's Exhausted condition, as its controller
// last wrote it.
func budgetSpent(b *v1alpha1.AgentBudget, now time.Time) bool {
	if !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ConditionExhausted) {
		return false
	}
	if end := b.Status.WindowEnd; end != nil && !now.Before(end.Time) {
		return false
	}
	return true
}

// reconcileAdmission holds a run that has no Job yet while a budget
// covering it is spent: it stays Queued (reason BudgetExhausted), and gets
// its Job once the budget has room (the budget's change brings it back).
func (r *AgentRunReconciler) reconcileAdmission(ctx context.Context, s *scope) error {
	run := s.run
	if s.job != nil || run.Status.JobName != "" || run.Spec.Stopped() {
		return nil
	}
	b, err := r.spentBudget(ctx, run, s.obs.Now)
	if err != nil || b == nil {
		return err
	}
	s.hold = &hold{Reason: v1alpha1.ReasonBudgetExhausted, Message: b.SpentMessage() + "; the run waits until the budget has room"}
	return nil
}

// reconcileBudgetStop stops a running agent whose budget is spent, as
// spec.stop does: the Pod is deleted (the runner passes the SIGTERM on as
// SIGINT and writes its end, so its usage and result so far are kept), and
// the harvest ends the run with reason BudgetExceeded, naming the budget
// from the annotations put on the Pod first.
func (r *AgentRunReconciler) reconcileBudgetStop(ctx context.Context, s *scope) error {
	pod := s.obs.Pod
	if s.outcome != nil || s.run.Spec.Stopped() || pod == nil || pod.DeletionTimestamp != nil ||
		containerStarted(pod, podcontract.AgentContainer) == nil || containerTerminated(pod, podcontract.AgentContainer) != nil {
		return nil
	}
	b, err := r.spentBudget(ctx, s.run, s.obs.Now)
	if err != nil || b == nil {
		return err
	}
	msg := b.SpentMessage()
	if pod.Annotations[AnnotationStopReason] != v1alpha1.ReasonBudgetExceeded {
		base := pod.DeepCopy()
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[AnnotationStopReason] = v1alpha1.ReasonBudgetExceeded
		pod.Annotations[AnnotationStopMessage] = msg
		if err := r.Patch(ctx, pod, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
	err = r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	s.events = append(s.events, event{corev1.EventTypeWarning, v1alpha1.ReasonBudgetExceeded,
		msg + ": stopping the agent in Pod " + pod.Name + " (SIGTERM, passed on as SIGINT); its usage and result so far are kept"})
	return nil
}

// refineOutcome says why a Pod deleted under a running agent was deleted,
// where the manager or a queue knows better than "PodDeleted": the manager
// stopped it for a budget (the Pod's stop annotations), or a queue
// suspended its Job (Kueue's preemption and eviction suspend the Job, and
// the Job controller deletes its Pod). It is a pure function of the
// observation and the computed outcome.
func refineOutcome(o observation, oc *outcome) *outcome {
	if oc == nil || oc.Reason != v1alpha1.ReasonPodDeleted {
		return oc
	}
	p := o.Pod
	if p != nil && p.Annotations[AnnotationStopReason] == v1alpha1.ReasonBudgetExceeded {
		oc.Reason, oc.FromSummary = v1alpha1.ReasonBudgetExceeded, false
		msg := p.Annotations[AnnotationStopMessage]
		if msg == "" {
			msg = "an AgentBudget covering the run is spent"
		}
		if oc.EndStatus == "interrupted" {
			oc.Detail = "stopped: " + msg + "; usage and result are what it had reached"
		} else {
			oc.Detail = "stopped: " + msg + "; " + oc.Detail
		}
		return oc
	}
	if jobSuspended(o.Job) {
		oc.Reason, oc.FromSummary = v1alpha1.ReasonPreempted, false
		oc.Detail = "preempted: the run's Job was suspended by its queue (Kueue preemption or eviction) and its Pod deleted; " + oc.Detail +
			"; usage and result are what it had reached (docs/kubernetes/kueue.md says how to resume a run with a session volume)"
	}
	return oc
}

// jobSuspended reports whether the Job is suspended now (spec.suspend, or
// the Job controller's Suspended condition).
func jobSuspended(job *batchv1.Job) bool {
	if job == nil {
		return false
	}
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		return true
	}
	return jobCondition(job, batchv1.JobSuspended) != nil
}

// applyHold is the status of a held run: Queued, with the hold's reason and
// message in every in-progress condition. A pure function.
func applyHold(st v1alpha1.AgentRunStatus, h hold, generation int64, now time.Time) v1alpha1.AgentRunStatus {
	if isTerminal(st) || st.JobName != "" {
		return st
	}
	st = *st.DeepCopy()
	st.Phase = v1alpha1.PhaseQueued
	for _, t := range []string{v1alpha1.ConditionSucceeded, v1alpha1.ConditionEnded, v1alpha1.ConditionReady,
		v1alpha1.ConditionStalled, v1alpha1.ConditionReconciling, v1alpha1.ConditionRunning} {
		c := meta.FindStatusCondition(st.Conditions, t)
		if c == nil {
			continue
		}
		nc := *c
		nc.Reason, nc.ObservedGeneration = h.Reason, generation
		if t == v1alpha1.ConditionReconciling || t == v1alpha1.ConditionRunning {
			nc.Message = h.Message
		}
		if nc.LastTransitionTime.IsZero() {
			nc.LastTransitionTime = metav1.NewTime(now)
		}
		meta.SetStatusCondition(&st.Conditions, nc)
	}
	return st
}

// budgetChanges brings back the runs of a namespace when one of its budgets
// becomes spent or has room again (or comes or goes): held runs may start,
// running ones may have to stop.
func (r *AgentRunReconciler) budgetChanges() (handler.EventHandler, predicate.Predicate) {
	h := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		b, ok := o.(*v1alpha1.AgentBudget)
		if !ok {
			return nil
		}
		runs := &v1alpha1.AgentRunList{}
		if err := r.List(ctx, runs, client.InNamespace(b.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil // read only (their names, status and labels)
		}
		var out []reconcile.Request
		for i := range runs.Items {
			run := &runs.Items[i]
			if !isTerminal(run.Status) && b.Covers(run) {
				out = append(out, reconcile.Request{NamespacedName: runKey(run)})
			}
		}
		return out
	})
	p := predicate.Funcs{
		UpdateFunc: func(e crevent.UpdateEvent) bool {
			ob, ok1 := e.ObjectOld.(*v1alpha1.AgentBudget)
			nb, ok2 := e.ObjectNew.(*v1alpha1.AgentBudget)
			if !ok1 || !ok2 {
				return false
			}
			oc := meta.FindStatusCondition(ob.Status.Conditions, v1alpha1.ConditionExhausted)
			nc := meta.FindStatusCondition(nb.Status.Conditions, v1alpha1.ConditionExhausted)
			flipped := (oc == nil) != (nc == nil) || (oc != nil && nc != nil && oc.Status != nc.Status)
			return flipped || !windowEndEqual(ob.Status.WindowEnd, nb.Status.WindowEnd) || ob.Generation != nb.Generation
		},
	}
	return h, p
}

func windowEndEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// holdDetail is what a run held for a budget says in its Queued event.
func holdDetail(st v1alpha1.AgentRunStatus) (string, bool) {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRunning)
	if c == nil || c.Reason != v1alpha1.ReasonBudgetExhausted {
		return "", false
	}
	return fmt.Sprint(c.Message), true
}
