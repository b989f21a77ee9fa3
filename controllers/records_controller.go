package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// DefaultRecordsResync is how often a namespace with ended runs is looked
// at again when nothing else asks: an annotation added to the Namespace
// (which the manager only reads, never watches) takes effect within it.
const DefaultRecordsResync = 10 * time.Minute

// RecordsReconciler deletes the ended AgentRuns of namespaces that opt in
// to records that expire (planRecordExpiry says which). Its key is a
// namespace: it runs when a run of the namespace ends, when a record's
// TTL or a budget window is due, and every Resync.
type RecordsReconciler struct {
	client.Client
	// APIReader reads the Namespace: the manager may get the namespaces
	// it watches (a Role there suffices), not list or watch them.
	APIReader client.Reader
	Recorder  record.EventRecorder
	Clock     clock.PassiveClock
	// Resync is DefaultRecordsResync when zero.
	Resync time.Duration
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=agentrun.dev,resources=agentruns,verbs=delete

// Reconcile expires one namespace's records.
func (r *RecordsReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("namespace", req.Name)
	ns := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: req.Name}, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	retention, ok, err := parseRecordRetention(ns.Annotations)
	if err != nil {
		// Nothing expires: the admin's typo must not delete records.
		r.Recorder.Event(ns, corev1.EventTypeWarning, "InvalidRecordRetention", err.Error()+"; no AgentRun expires until it is fixed")
		log.Error(err, "records do not expire")
		return ctrl.Result{RequeueAfter: r.resync()}, nil
	}
	if !ok {
		// Not opted in: look again later (an annotation is read, never
		// watched), without listing the namespace's runs.
		return ctrl.Result{RequeueAfter: r.resync()}, nil
	}
	runs := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, runs, client.InNamespace(req.Name)); err != nil {
		return ctrl.Result{}, err
	}
	budgets := &v1alpha1.AgentBudgetList{}
	if err := r.List(ctx, budgets, client.InNamespace(req.Name)); err != nil {
		return ctrl.Result{}, err
	}
	plan := planRecordExpiry(retention, runs.Items, budgets.Items, r.Clock.Now())
	for _, e := range plan.expire {
		// The preconditions: the run deleted is the one judged, as it
		// was (a run re-created under the same name, or changed since,
		// is judged again).
		err := r.Delete(ctx, e.run, client.Preconditions{UID: &e.run.UID, ResourceVersion: &e.run.ResourceVersion},
			client.PropagationPolicy("Background"))
		switch {
		case err == nil:
			log.Info("deleted an expired record", "agentRun", e.run.Name, "why", e.why)
			r.Recorder.Eventf(e.run, corev1.EventTypeNormal, "RecordExpired", "deleted: %s", e.why)
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			return ctrl.Result{RequeueAfter: time.Second}, nil // judged on a stale copy: look again
		default:
			return ctrl.Result{}, err
		}
	}
	after := r.resync()
	if plan.recheck > 0 && plan.recheck < after {
		after = plan.recheck
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func (r *RecordsReconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return DefaultRecordsResync
}

// runEnded is true for a run that is created ended (a manager's start
// sees every run) or whose end has just been written.
var runEnded = predicate.Funcs{
	CreateFunc:  func(e crevent.CreateEvent) bool { return endedRun(e.Object) },
	UpdateFunc:  func(e crevent.UpdateEvent) bool { return !endedRun(e.ObjectOld) && endedRun(e.ObjectNew) },
	DeleteFunc:  func(crevent.DeleteEvent) bool { return false },
	GenericFunc: func(crevent.GenericEvent) bool { return false },
}

func endedRun(o client.Object) bool {
	run, ok := o.(*v1alpha1.AgentRun)
	return ok && isTerminal(run.Status)
}

// SetupWithManager: a run's end enqueues its namespace.
func (r *RecordsReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("records").
		Watches(&v1alpha1.AgentRun{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		}), builder.WithPredicates(runEnded)).
		Complete(r)
}
