// Package controllers reconciles AgentRuns: one batch/v1 Job per AgentRun,
// whose Pod runs `agentrun run` (container "agent") next to the `agentrun
// tail` sidecar (container "events"); when the agent ends, the controller
// harvests its end summary (the termination message) and, when that was
// cut, the end event from the sidecar's log, into the AgentRun's status.
//
// Files by concern: agentrun_controller.go (Reconcile, the scope, set-up),
// agentrun_phases.go (the phase functions), agentrun_status.go (pure
// functions: outcome, status, conditions, events), job.go (the Job, a pure
// function of the spec), logs.go (the log reader), metrics.go; live.go and
// agentrun_live.go (the live progress of running runs), prices.go (cost
// estimates), agentrun_budget.go (budgets as the AgentRun reconciler sees
// them: holding new runs, stopping running ones), budget_controller.go and
// budget_status.go (the AgentBudget reconciler and its pure functions).
package controllers

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// conflictRetry is when an object whose write lost to another writer's is
// read and reconciled again. The other write's watch event usually brings
// it back sooner; this covers the case where it does not (the write was
// to another object, or the cache is behind). A fixed short wait, as
// controller-runtime deprecated the rate-limited Requeue.
const conflictRetry = 100 * time.Millisecond

// AnnotationRun carries the AgentRun's full name on its Pod (a label value
// holds only 63 characters), to map Pod events back to the AgentRun.
const AnnotationRun = "agentrun.dev/run"

// AgentRunReconciler reconciles AgentRuns.
type AgentRunReconciler struct {
	client.Client
	// APIReader reads around the cache, to confirm that a Job or Pod the
	// status names is really gone before the run is failed for it.
	APIReader client.Reader
	Recorder  record.EventRecorder
	Clock     clock.PassiveClock
	Logs      LogReader
	Job       JobConfig
	Graces    Graces
	// MaxConcurrentReconciles defaults to 4.
	MaxConcurrentReconciles int
	// Live reads running runs' live progress from their Pods; nil: status
	// gets usage and counters at the end only.
	Live *Live
	// LiveIntervals bound the live status writes per run
	// (DefaultLiveIntervals when zero).
	LiveIntervals LiveIntervals
	// Prices estimate the cost of usage whose runtime reported none.
	Prices Prices

	spendCounter *spendCounter
	// ownWrites holds, by run, the resourceVersion of this manager's last
	// status write until its watch event comes back: the reconcile that
	// wrote it has acted on everything that status says (what follows
	// from it is requeued), so that event brings nothing to do.
	ownWrites sync.Map // types.NamespacedName -> string
}

// scope is everything one reconcile reads, read once, and what it decided.
type scope struct {
	run  *v1alpha1.AgentRun // as read; only its status is changed
	job  *batchv1.Job
	pods []corev1.Pod // this run's Pods (by uid)
	// foreign are Pods of an earlier AgentRun of the same name.
	foreign []corev1.Pod

	obs     observation
	outcome *outcome
	// waiting: the harvest waits for the events container before it
	// decides, so no outcome is computed this time.
	waiting bool
	// created: this reconcile created the Job. Status is written by the
	// reconcile that the Job's own watch event brings, from the Job as
	// observed: one write fewer on the path from AgentRun to Job, and at
	// a lower priority (afterJobPriority), so a burst of AgentRuns gets
	// its Jobs first and its statuses after.
	created bool
	events  []event
	requeue time.Duration
	// hold keeps the run from getting its Job (a spent budget).
	hold *hold
	// liveWrite is the live progress this status write carries.
	liveWrite *liveWritten
}

// requeueAfter asks to look again within d (the earliest request wins).
func (s *scope) requeueAfter(d time.Duration) {
	if d > 0 && (s.requeue == 0 || d < s.requeue) {
		s.requeue = d
	}
}

// The manager never deletes an AgentRun (it is the run's record, and
// GitOps tools would re-create it); it deletes Pods only to cancel a run.
// It creates one ConfigMap per run with a patch (spec.git), owned by the
// run, and reads it back only by name (no list or watch of ConfigMaps).
//
// +kubebuilder:rbac:groups=agentrun.dev,resources=agentruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrun.dev,resources=agentruns/status,verbs=get;update
//
// The Job's owner reference blocks the AgentRun's deletion until the Job is
// gone (blockOwnerDeletion), which clusters that enforce owner references
// (the OwnerReferencesPermissionEnforcement admission plugin: OpenShift,
// hardened clusters) allow only to who may update the owner's finalizers.
// The manager sets no finalizer on an AgentRun.
//
// +kubebuilder:rbac:groups=agentrun.dev,resources=agentruns/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create
// +kubebuilder:rbac:groups=agentrun.dev,resources=agentbudgets,verbs=get;list;watch

// Reconcile brings one AgentRun a step closer to its end: the Job, then the
// Pod, then the harvest, then a cancel; one status write; then what follows
// from a status already written (releasing the Pod, the TTL).
func (r *AgentRunReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		// Someone wrote first (the Job controller on a Pod, a user on the
		// AgentRun): read again, without logging an error.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}

func (r *AgentRunReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	run := &v1alpha1.AgentRun{}
	if err := r.Get(ctx, req.NamespacedName, run); err != nil {
		if apierrors.IsNotFound(err) {
			r.ownWrites.Delete(req.NamespacedName)
			r.forgetDeleted(req.NamespacedName)
			return ctrl.Result{}, r.releaseOrphans(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	s, err := r.newScope(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releasePods(ctx, s.foreign); err != nil {
		return ctrl.Result{}, err
	}
	if isTerminal(run.Status) {
		if err := r.reconcileEnded(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		return r.writeStatus(ctx, s)
	}
	for _, phase := range []func(context.Context, *scope) error{r.reconcileAdmission, r.reconcileJob, r.reconcilePod,
		r.reconcileRejection, r.reconcileHarvest, r.reconcileCancel, r.reconcileBudgetStop, r.reconcileLive} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if s.created {
		// The Job's create event brings the run back, below the runs
		// still waiting for their Jobs (afterJobPriority). No requeue
		// here: the queue would keep this reconcile's higher priority.
		return ctrl.Result{}, nil
	}
	return r.writeStatus(ctx, s)
}

// newScope reads the run's Job and Pods from the cache.
func (r *AgentRunReconciler) newScope(ctx context.Context, run *v1alpha1.AgentRun) (*scope, error) {
	s := &scope{run: run, obs: observation{Now: r.Clock.Now(), Cancel: run.Spec.Stopped(), Started: run.Status.StartTime != nil}}
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: JobName(run.Name)}, job)
	switch {
	case err == nil:
		s.job = job
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(run.Namespace),
		client.MatchingLabels{LabelName: labelValue(run.Name)}); err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if p.Annotations[AnnotationRun] != "" && p.Annotations[AnnotationRun] != run.Name {
			continue // another run whose name shares the cut label
		}
		if p.Labels[LabelUID] == string(run.UID) {
			s.pods = append(s.pods, p)
		} else {
			s.foreign = append(s.foreign, p)
		}
	}
	return s, nil
}

// writeStatus computes the new status, writes it once if it changed, and
// then records what the change means (Events, metrics).
func (r *AgentRunReconciler) writeStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	run := s.run
	old := run.Status
	st := computeStatus(old, run.Generation, s.obs, s.outcome)
	st = r.completeStatus(s, old, st)
	if !isTerminal(old) && isTerminal(st) && len(run.Labels) > 0 {
		// The labels the budgets counted it by (BudgetLabels) from now on.
		st.LabelsAtEnd = maps.Clone(run.Labels)
	}
	if !equality.Semantic.DeepEqual(old, st) {
		// An update of the status subresource, with the read
		// resourceVersion (a conflict means a newer AgentRun: the next
		// reconcile sees it): the API server takes it as it comes, where a
		// merge patch costs it an encode of the stored object, the merge and
		// two decodes (a third of a status write in its profile,
		// docs/benchmarks.md). The spec and metadata sent are ignored;
		// status fields this manager does not know (a newer one's, after a
		// downgrade) are dropped, which a patch would have kept: the status
		// is the controller's own, computed again from what it observes.
		run.Status = st
		err := r.Status().Update(ctx, run)
		if tooLarge(err) {
			// The run would otherwise never end: every retry is as large.
			full := err
			st = trimStatus(st)
			run.Status = st
			if err = r.Status().Update(ctx, run); err == nil {
				s.events = append(s.events, event{corev1.EventTypeWarning, "StatusTrimmed", cutText(
					"the API server refused the status as too large ("+full.Error()+"); it was written without the result, "+
						"the by-model split and the activity, which the event log keeps (kubectl logs -c events)", maxConditionMessageBytes)})
			}
		}
		if err != nil {
			run.Status = old
			return ctrl.Result{}, err
		}
		r.ownWrites.Store(runKey(run), run.ResourceVersion)
	}
	r.statusWritten(s, old, st)
	for _, e := range append(s.events, computeEvents(old, st)...) {
		r.Recorder.Event(run, e.Type, e.Reason, e.Message)
	}
	if !isTerminal(old) && isTerminal(st) {
		reason := ""
		if s.outcome != nil {
			reason = s.outcome.Reason
		}
		recordEnd(run, reason)
		recordGenAI(run, r.spend().labels)
		log.FromContext(ctx).Info("run ended", "status", st.EndStatus, "reason", reason, "job", st.JobName, "pod", st.PodName)
		// The next reconcile releases the Pod, from the written status.
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

// CacheOptions keep the manager's cache to agentrun's own Jobs and Pods,
// and of the Events only the Job controller's refusals to create a Job's
// Pod (see podrejection.go): a cache of every Event of the cluster would be
// large, and a list per Pod-less run on every poll was a request per run
// to the API server (a backlog of 1,000 runs made 1,000).
func CacheOptions() cache.Options {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:   {Label: sel},
			&batchv1.Job{}:  {Label: sel, Transform: jobWithoutTemplate},
			&corev1.Event{}: {Field: podRefusals},
		},
		// managedFields are often the larger part of an object, and the
		// manager never reads them: a cache of many runs is smaller without.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// jobWithoutTemplate is a Job as the manager caches it: without its Pod
// template, which the manager writes once and never reads back (the Pod
// itself is cached), and without managedFields. The template is most of a
// Job, and a finished run's Job stays until its TTL: at 10,000 runs the
// manager held ~336 MiB with templates. Nothing updates a Job from the
// cache (it is created, read and deleted only), so the copy cannot write a
// missing template back.
func jobWithoutTemplate(o any) (any, error) {
	if job, ok := o.(*batchv1.Job); ok {
		job.Spec.Template = corev1.PodTemplateSpec{}
		job.ManagedFields = nil
	}
	return o, nil
}

// SetupWithManager reads as the flow: AgentRuns own Jobs, whose Pods are
// watched too; a budget that becomes spent or has room again, and a
// running run's live progress, bring runs back.
func (r *AgentRunReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Graces == (Graces{}) {
		r.Graces = DefaultGraces
	}
	r.spendCounter = newSpendCounter(r.Prices.Models())
	reader := client.Reader(mgr.GetCache())
	// A runnable without NeedLeaderElection runs on the leader only: the
	// gauges are reported by one replica (stateCollector).
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		state.reader.Store(&reader)
		<-ctx.Done()
		state.reader.CompareAndSwap(&reader, nil)
		return nil
	})); err != nil {
		return err
	}
	n := r.MaxConcurrentReconciles
	if n <= 0 {
		n = 4
	}
	if err := indexRefusals(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := informWatchedKinds(mgr.GetCache()); err != nil {
		return err
	}
	budgets, budgetFlips := r.budgetChanges()
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentRun{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: r.notOwnWrite})).
		Watches(&batchv1.Job{}, jobEvents(handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
			&v1alpha1.AgentRun{}, handler.OnlyControllerOwner()))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToRun)).
		Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(r.refusalToRun)).
		Watches(&v1alpha1.AgentBudget{}, budgets, builder.WithPredicates(budgetFlips))
	if r.Live != nil {
		if err := mgr.Add(r.Live); err != nil {
			return err
		}
		b = b.WatchesRawSource(source.Channel(r.Live.Events(), &handler.EnqueueRequestForObject{}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: n, UsePriorityQueue: ptr.To(true)}).
		Named("agentrun").
		Complete(r)
}

// informWatchedKinds makes the cache's informer for every kind the
// controller watches before the manager starts, so that the cache lists
// them all at once and the controller, when it starts, finds them synced.
// Made by the watches, they would start only after the cache's own first
// sync (of the Events, which the refusals' index made early), and
// client-go looks at a sync every 100 ms: every start of the manager
// waited up to 100 ms more before its first reconcile (hack/scale-bench,
// the backlog: docs/benchmarks.md).
func informWatchedKinds(c cache.Cache) error {
	for _, o := range []client.Object{&v1alpha1.AgentRun{}, &batchv1.Job{}, &corev1.Pod{}, &v1alpha1.AgentBudget{}} {
		if _, err := c.GetInformer(context.Background(), o); err != nil {
			return fmt.Errorf("informer for %T: %w", o, err)
		}
	}
	return nil
}

// notOwnWrite drops the watch event of this manager's own status write
// (ownWrites); any other change of the run, later writes included, passes.
func (r *AgentRunReconciler) notOwnWrite(e crevent.UpdateEvent) bool {
	key := types.NamespacedName{Namespace: e.ObjectNew.GetNamespace(), Name: e.ObjectNew.GetName()}
	rv, ok := r.ownWrites.Load(key)
	if !ok {
		return true
	}
	if rv == e.ObjectNew.GetResourceVersion() {
		r.ownWrites.CompareAndDelete(key, rv)
		return false
	}
	return true
}

func (r *AgentRunReconciler) spend() *spendCounter {
	if r.spendCounter == nil {
		r.spendCounter = newSpendCounter(r.Prices.Models())
	}
	return r.spendCounter
}

// forgetDeleted stops reading a deleted run's live progress and counts
// what its last document held beyond its status: the spend of a run
// deleted mid-flight is counted, once.
func (r *AgentRunReconciler) forgetDeleted(key types.NamespacedName) {
	if r.Live == nil {
		return
	}
	uid, doc := r.Live.ForgetName(key)
	if doc == nil {
		return
	}
	r.spend().deleted(uid, estimateCost(statusUsage(doc.Usage), r.Prices))
}

// podToRun maps a Pod to its AgentRun.
func podToRun(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetAnnotations()[AnnotationRun]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
