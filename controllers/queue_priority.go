package controllers

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The controller's queue is controller-runtime's priority queue, so that a
// burst of runs gets its Jobs before its statuses: the API server is the
// bottleneck of a burst, and a run's first reconcile (its Job) is what
// starts it, while the reconcile its Job's create event brings only writes
// the status (Job name, conditions). Priorities, highest first:
//
//   - 0: a run created or changed while the manager runs, a Pod's event, a
//     budget's, live progress;
//   - handler.LowPriority (-100): what the cache's first list brings at the
//     manager's start (a backlog), and unchanged objects of a resync;
//   - afterJobPriority (-200): a run whose Job was just created, and its
//     later polls (a requeue keeps the priority of the reconcile that asked
//     for it), until any other event of the run raises it.
//
// The queue keeps an item's highest priority, so a reconcile that asks for
// a requeue of its own would raise the Job's create event to its priority:
// the reconcile that creates the Job asks for none (the create event comes
// through the cache's watch of the manager's own Jobs).
//
// Under a sustained burst the statuses wait until the Jobs are made; the
// scale benchmark (docs/benchmarks.md) measures both.
const afterJobPriority = 2 * handler.LowPriority

// jobEvents maps a Job's events to its run (the owner handler's own
// mapping), the create event at afterJobPriority.
func jobEvents(owner handler.EventHandler) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e crevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			owner.Create(ctx, e, atMost(q, afterJobPriority))
		},
		UpdateFunc:  owner.Update,
		DeleteFunc:  owner.Delete,
		GenericFunc: owner.Generic,
	}
}

// atMost is q with every add at priority p or lower; q itself when it is
// not a priority queue.
func atMost(q workqueue.TypedRateLimitingInterface[reconcile.Request], p int) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return cappedQueue{PriorityQueue: pq, max: p}
}

type cappedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	max int
}

func (q cappedQueue) Add(item reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

func (q cappedQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, item)
}

func (q cappedQueue) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func (q cappedQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	o.Priority = ptr.To(min(ptr.Deref(o.Priority, 0), q.max))
	q.PriorityQueue.AddWithOpts(o, items...)
}
