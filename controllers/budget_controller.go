package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// DefaultBudgetInterval is the least time between two writes of a budget's
// status that only move its numbers; a budget that becomes spent or has
// room again, a new window, and deleted runs' totals are written at once.
const DefaultBudgetInterval = 5 * time.Second

// BudgetReconciler keeps each AgentBudget's status: its window, what the
// runs it covers spent there, and whether it is spent. The AgentRun
// reconciler acts on that status (it holds new runs and stops running
// ones); this one only counts.
type BudgetReconciler struct {
	client.Client
	Clock clock.PassiveClock
	// Live gives the freshest usage of a run deleted while it ran.
	Live *Live
	// Prices estimate that usage's cost.
	Prices Prices
	// Interval is DefaultBudgetInterval when zero.
	Interval time.Duration

	mu sync.Mutex
	// deleted are the runs deleted since a budget last wrote its status,
	// by budget.
	deleted map[types.NamespacedName][]deletedRun
	// written is when each budget's status was last written.
	written map[types.NamespacedName]time.Time
}

// +kubebuilder:rbac:groups=agentrun.dev,resources=agentbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrun.dev,resources=agentbudgets/status,verbs=get;update;patch

// Reconcile computes one budget's status and writes it when it changed.
func (r *BudgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1alpha1.AgentBudget{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			delete(r.deleted, req.NamespacedName)
			delete(r.written, req.NamespacedName)
			r.mu.Unlock()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The cache's own objects, not copies: computeBudgetStatus only reads
	// them, and a copy of every run of the namespace per count is the
	// larger part of a busy namespace's cost.
	runs := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, runs, client.InNamespace(b.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	r.mu.Lock()
	deleted := append([]deletedRun{}, r.deleted[req.NamespacedName]...)
	last := r.written[req.NamespacedName]
	r.mu.Unlock()

	res := computeBudgetStatus(b, runs.Items, deleted, now)
	st := res.status
	var requeue time.Duration
	if !equality.Semantic.DeepEqual(b.Status, st) {
		// The interval bounds API load, in the wall clock's time.
		wall := time.Now()
		if due := last.Add(r.interval()); len(deleted) == 0 && !budgetChangeIsUrgent(b.Status, st) && wall.Before(due) {
			requeue = due.Sub(wall)
		} else {
			base := b.DeepCopy()
			b.Status = st
			if err := r.Status().Patch(ctx, b, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				if apierrors.IsConflict(err) {
					return ctrl.Result{RequeueAfter: conflictRetry}, nil
				}
				return ctrl.Result{}, err
			}
			r.mu.Lock()
			r.written[req.NamespacedName] = wall
			// The deleted runs are in the status now; drop those taken.
			if rest := r.deleted[req.NamespacedName]; len(rest) >= len(deleted) {
				r.deleted[req.NamespacedName] = rest[len(deleted):]
			}
			r.mu.Unlock()
		}
	}
	if res.recheck > 0 && (requeue == 0 || res.recheck < requeue) {
		requeue = res.recheck
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *BudgetReconciler) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return DefaultBudgetInterval
}

// budgetChangeIsUrgent: what the AgentRun reconciler acts on (the
// condition's status and reason, a new calendar window) goes out at once;
// moving numbers wait for the interval.
func budgetChangeIsUrgent(old, st v1alpha1.AgentBudgetStatus) bool {
	oc := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionExhausted)
	nc := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionExhausted)
	if oc == nil || nc == nil || oc.Status != nc.Status || oc.Reason != nc.Reason || oc.ObservedGeneration != nc.ObservedGeneration {
		return true
	}
	return !windowEndEqual(old.WindowEnd, st.WindowEnd) || old.ObservedGeneration != st.ObservedGeneration
}

// runDeleted keeps a deleted run's spend for every budget of its namespace
// that covered it, with the freshest usage known (its live progress may be
// ahead of its last status write).
func (r *BudgetReconciler) runDeleted(ctx context.Context, run *v1alpha1.AgentRun, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	st := run.Status
	if r.Live != nil {
		if doc, _ := r.Live.latest(run.UID); doc != nil && !isTerminal(st) {
			live := applyLive(st, doc)
			live.Usage = estimateCost(live.Usage, r.Prices)
			if spendOf(live).tokens >= spendOf(st).tokens {
				st = live
			}
		}
	}
	d := deletedRun{uid: run.UID, spend: spendOf(st), until: r.Clock.Now()}
	if ct := st.CompletionTime; ct != nil {
		d.until = ct.Time
	}
	if st.StartTime == nil && st.Usage == nil {
		return // it never ran
	}
	budgets := &v1alpha1.AgentBudgetList{}
	if err := r.List(ctx, budgets, client.InNamespace(run.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return // read only (Covers)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range budgets.Items {
		b := &budgets.Items[i]
		if !b.Covers(run) {
			continue
		}
		key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
		r.deleted[key] = append(r.deleted[key], d)
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// SetupWithManager: budgets are counted again when a run of their
// namespace changes what they count of it, and keep what a deleted run
// spent.
func (r *BudgetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.deleted = map[types.NamespacedName][]deletedRun{}
	r.written = map[types.NamespacedName]time.Time{}
	toBudgets := func(ctx context.Context, ns string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		list := &v1alpha1.AgentBudgetList{}
		if err := r.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return // read only (the names)
		}
		for _, b := range list.Items {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
		}
	}
	// Only a run whose budget view changed can change a budget's status:
	// most status writes (the phase of a run that has not started, a
	// condition, live progress without new usage) count nothing again.
	runs := handler.Funcs{
		CreateFunc: func(ctx context.Context, e crevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if run, ok := e.Object.(*v1alpha1.AgentRun); ok && budgetViewOf(run) != nil {
				toBudgets(ctx, run.Namespace, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e crevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, ok1 := e.ObjectOld.(*v1alpha1.AgentRun)
			run, ok2 := e.ObjectNew.(*v1alpha1.AgentRun)
			if ok1 && ok2 && !budgetViewChanged(old, run) {
				return
			}
			toBudgets(ctx, e.ObjectNew.GetNamespace(), q)
		},
		DeleteFunc: func(ctx context.Context, e crevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if run, ok := e.Object.(*v1alpha1.AgentRun); ok {
				r.runDeleted(ctx, run, q)
			}
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentBudget{}).
		Watches(&v1alpha1.AgentRun{}, runs).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("agentbudget").
		Complete(r)
}
