package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// logPoll is how often the harvest looks again while it waits for the
// events container to terminate (it normally takes well under a second
// after the agent container).
const logPoll = 2 * time.Second

// reconcileJob makes sure the run has its one Job: created once under a
// deterministic name, adopted after a restart, and reported gone when it
// was deleted under the run.
func (r *AgentRunReconciler) reconcileJob(ctx context.Context, s *scope) error {
	run := s.run
	if s.job != nil {
		if !metav1.IsControlledBy(s.job, run) {
			return r.jobConflict(s, s.job)
		}
		s.obs.Job = s.job
		return nil
	}
	name := JobName(run.Name)
	if run.Spec.Stopped() && run.Status.JobName == "" {
		// Cancelled before it had a Job: it never gets one.
		return nil
	}
	if s.hold != nil && run.Status.JobName == "" {
		// A spent budget holds it (reconcileAdmission).
		return nil
	}
	if run.Status.JobName != "" {
		// Created before: the cache may lag, so ask the API server.
		job := &batchv1.Job{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: name}, job)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(job, run)):
			s.obs.JobGone = true
			return nil
		case err != nil:
			return err
		}
		s.job, s.obs.Job = job, job
		return nil
	}
	job := BuildJob(run, r.Job)
	err := r.Create(ctx, job)
	switch {
	case err == nil:
		// No Event for this: an Event is one more write per run, and the
		// Job's creation shows in status.jobName and in the Job itself.
		log.FromContext(ctx).V(1).Info("created Job", "job", job.Name)
		s.created = true
		if err := InvalidTraceParent(run, r.Job.Telemetry); err != nil {
			s.events = append(s.events, event{corev1.EventTypeWarning, "TraceParentIgnored",
				fmt.Sprintf("annotation %s ignored, the run has a trace of its own: %v", v1alpha1.AnnotationTraceParent, err)})
		}
		return nil
	case apierrors.IsAlreadyExists(err):
		// Created by an earlier reconcile whose status write was lost (a
		// restart, a conflict): adopt it if it is ours.
		job = &batchv1.Job{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: name}, job); err != nil {
			return err
		}
		if !metav1.IsControlledBy(job, run) {
			return r.jobConflict(s, job)
		}
	case apierrors.IsInvalid(err):
		// The API server will never accept this Job: the run cannot start.
		s.outcome = &outcome{EndStatus: events.StatusRejected, Reason: v1alpha1.ReasonJobRejected, Completion: s.obs.Now,
			Detail: "the API server rejected the run's Job: " + err.Error()}
		return nil
	default:
		return err
	}
	s.job, s.obs.Job = job, job
	return nil
}

func (r *AgentRunReconciler) jobConflict(s *scope, job *batchv1.Job) error {
	msg := fmt.Sprintf("a Job named %s exists and is not this AgentRun's (an earlier AgentRun of the same name may still be deleting)", job.Name)
	r.Recorder.Event(s.run, corev1.EventTypeWarning, "JobConflict", msg)
	return errors.New(msg)
}

// reconcilePod finds the run's Pod. A Pod the status names that the API
// server no longer has vanished before the harvest.
func (r *AgentRunReconciler) reconcilePod(ctx context.Context, s *scope) error {
	run := s.run
	var pod *corev1.Pod
	for i := range s.pods {
		p := &s.pods[i]
		switch {
		case p.Name == run.Status.PodName:
			pod = p
		case run.Status.PodName == "" && (pod == nil || p.CreationTimestamp.After(pod.CreationTimestamp.Time)):
			pod = p
		}
	}
	if pod == nil && run.Status.PodName != "" {
		p := &corev1.Pod{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Status.PodName}, p)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && p.Labels[LabelUID] != string(run.UID)):
			s.obs.PodGone = true
			return nil
		case err != nil:
			return err
		}
		pod = p
	}
	s.obs.Pod = pod
	return nil
}

// reconcileHarvest reads the end of a run whose agent container
// terminated: the summary from its termination message, and, when the
// summary was cut, the end event from the events container's log, read
// only after that container terminated. Then it decides the outcome.
func (r *AgentRunReconciler) reconcileHarvest(ctx context.Context, s *scope) error {
	if s.outcome != nil {
		return nil
	}
	pod := s.obs.Pod
	if t := containerTerminated(pod, podcontract.AgentContainer); t != nil {
		sum, err := podcontract.Decode([]byte(t.Message))
		if err != nil {
			s.obs.SummaryErr = err
		} else {
			s.obs.Summary = &sum
		}
		if err == nil && sum.Cut() {
			if !r.readEventLog(ctx, s, pod, t) {
				s.waiting = true
				return nil
			}
		}
	}
	oc, recheck := computeOutcome(s.obs, r.Graces)
	s.outcome = refineOutcome(s.obs, oc)
	s.requeueAfter(recheck)
	return nil
}

// readEventLog reads the end event from the events container's log into
// the observation. It returns false while it should wait for that
// container to terminate (Tekton lost results reading too early).
func (r *AgentRunReconciler) readEventLog(ctx context.Context, s *scope, pod *corev1.Pod, agent *corev1.ContainerStateTerminated) bool {
	if containerTerminated(pod, podcontract.EventsContainer) == nil {
		deadline := agent.FinishedAt.Add(r.Graces.EventLog)
		if s.obs.Now.Before(deadline) && pod.DeletionTimestamp == nil {
			s.requeueAfter(min(logPoll, deadline.Sub(s.obs.Now)))
			return false
		}
		s.obs.LogErr = fmt.Errorf("the %s container did not terminate within %s of the agent", podcontract.EventsContainer, r.Graces.EventLog)
	} else {
		s.obs.LogEnd, s.obs.LogErr = readLogEnd(ctx, r.Logs, pod)
	}
	if s.obs.LogErr != nil {
		s.events = append(s.events, event{corev1.EventTypeWarning, "EventLogUnread",
			"the result in status is the end summary's cut one: " + s.obs.LogErr.Error()})
	}
	return true
}

// reconcileCancel carries out spec.stop. A run whose agent has not
// started has its outcome already (computeOutcome): its Job goes now,
// before that outcome is written, so a queue cannot start it in between. A
// running agent is stopped by deleting its Pod: the kubelet's SIGTERM,
// which agentrun passes to the CLI as SIGINT, ends it as interrupted with
// its end summary, and the harvest finalizer keeps the Pod until that is
// in status (computeOutcome then says Cancelled). The Job is not deleted
// for it: with backoffLimit 0 it fails and starts no other Pod (and
// reconcileEnded deletes one that does).
func (r *AgentRunReconciler) reconcileCancel(ctx context.Context, s *scope) error {
	if !s.run.Spec.Stopped() {
		return nil
	}
	if oc := s.outcome; oc != nil {
		if oc.Reason == v1alpha1.ReasonCancelled && s.obs.neverStarted() && s.job != nil && s.job.DeletionTimestamp == nil && metav1.IsControlledBy(s.job, s.run) {
			_, err := r.deleteJob(ctx, s.job)
			return err
		}
		return nil
	}
	pod := s.obs.Pod
	if pod == nil || pod.DeletionTimestamp != nil || containerTerminated(pod, podcontract.AgentContainer) != nil {
		// Nothing to stop: no Pod seen yet, already stopping, or ended
		// (the harvest waits for the events container).
		return nil
	}
	err := r.Delete(ctx, pod, ctrl.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	s.events = append(s.events, event{corev1.EventTypeNormal, "Cancelling",
		"spec.stop is set: stopping the agent in Pod " + pod.Name + " (SIGTERM, passed on as SIGINT); its usage and result so far are kept"})
	return nil
}

// reconcileEnded runs once the end is in status: it releases the Pod (its
// result is safe now), stops a Job that never got its agent going, and
// deletes the Job (with its Pod) when spec.retention.jobTTLAfterEnd has
// passed. The AgentRun itself always stays: it is the run's record, and a
// GitOps tool would re-create a deleted one and so run it again.
func (r *AgentRunReconciler) reconcileEnded(ctx context.Context, s *scope) error {
	if err := r.releasePods(ctx, s.pods); err != nil {
		return err
	}
	job := s.job
	if job == nil || job.DeletionTimestamp != nil || !metav1.IsControlledBy(job, s.run) {
		return nil
	}
	if !jobFinished(job) && (!agentEnded(s.pods) || hasOtherPods(s.pods, s.run.Status.PodName) || jobSuspended(job)) {
		// A Job whose Pod cannot start (or is gone) would otherwise keep
		// trying until its deadline, and one that made a second Pod, or
		// that a queue suspended and would resume (a preempted run),
		// would run the agent again: the run has ended, so the Job goes.
		_, err := r.deleteJob(ctx, job)
		return err
	}
	ttl, set := s.run.Spec.JobTTL()
	if !set || s.run.Status.CompletionTime == nil {
		return nil
	}
	expires := s.run.Status.CompletionTime.Add(ttl)
	if now := s.obs.Now; now.Before(expires) {
		s.requeueAfter(expires.Sub(now))
		return nil
	}
	deleted, err := r.deleteJob(ctx, job)
	if err != nil || !deleted {
		return err
	}
	s.events = append(s.events, event{corev1.EventTypeNormal, "JobRemoved", fmt.Sprintf(
		"spec.retention.jobTTLAfterEnd (%s) has passed: the Job %s and its Pod are deleted; this AgentRun keeps the run's record", s.run.Spec.Retention.JobTTLAfterEnd, job.Name)})
	return nil
}

// deleteJob deletes a Job of this run and, through the garbage collector,
// its Pods. It reports false when the Job was gone already (the cache may
// show a Job this manager deleted a moment ago).
func (r *AgentRunReconciler) deleteJob(ctx context.Context, job *batchv1.Job) (bool, error) {
	err := r.Delete(ctx, job, ctrl.PropagationPolicy(metav1.DeletePropagationBackground), ctrl.Preconditions{UID: &job.UID})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func jobFinished(job *batchv1.Job) bool {
	return jobCondition(job, batchv1.JobComplete) != nil || jobCondition(job, batchv1.JobFailed) != nil
}

func hasOtherPods(pods []corev1.Pod, harvested string) bool {
	for i := range pods {
		if pods[i].Name != harvested {
			return true
		}
	}
	return false
}

func agentEnded(pods []corev1.Pod) bool {
	for i := range pods {
		if containerTerminated(&pods[i], podcontract.AgentContainer) != nil {
			return true
		}
	}
	return false
}

// releasePods removes the harvest finalizer. The patch carries the
// resourceVersion: the Job controller edits the same finalizer list.
func (r *AgentRunReconciler) releasePods(ctx context.Context, pods []corev1.Pod) error {
	for i := range pods {
		p := &pods[i]
		if !controllerutil.ContainsFinalizer(p, HarvestFinalizer) {
			continue
		}
		base := p.DeepCopy()
		controllerutil.RemoveFinalizer(p, HarvestFinalizer)
		err := r.Patch(ctx, p, ctrl.MergeFromWithOptions(base, ctrl.MergeFromWithOptimisticLock{}))
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// releaseOrphans releases the Pods of a deleted AgentRun: nothing is left
// to harvest into.
func (r *AgentRunReconciler) releaseOrphans(ctx context.Context, name types.NamespacedName) error {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, ctrl.InNamespace(name.Namespace), ctrl.MatchingLabels{LabelName: labelValue(name.Name)}); err != nil {
		return err
	}
	var orphans []corev1.Pod
	for _, p := range pods.Items {
		if p.Annotations[AnnotationRun] == name.Name {
			orphans = append(orphans, p)
		}
	}
	return r.releasePods(ctx, orphans)
}
