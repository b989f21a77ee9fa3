package controllers

import (
	"context"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

func testJobEvents(t *testing.T) handler.EventHandler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1alpha1.GroupVersion.WithKind("AgentRun"), meta.RESTScopeNamespace)
	return jobEvents(handler.EnqueueRequestForOwner(scheme, mapper, &v1alpha1.AgentRun{}, handler.OnlyControllerOwner()))
}

func ownedJob(run, rv string) *batchv1.Job {
	owner := &v1alpha1.AgentRun{}
	owner.Name, owner.Namespace, owner.UID = run, "ns", types.UID(run+"-uid")
	job := BuildJob(owner, JobConfig{RunnerImage: "runner"})
	job.ResourceVersion = rv
	return job
}

// TestJobEventPriorities: a Job's create event brings its run back below
// every run still waiting for its Job, the backlog's included; its other
// events keep the usual priorities.
func TestJobEventPriorities(t *testing.T) {
	cases := []struct {
		name  string
		send  func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request])
		wantP int
	}{
		{"created by this manager", func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), crevent.CreateEvent{Object: ownedJob("a", "1")}, q)
		}, afterJobPriority},
		{"found by the cache's first list", func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), crevent.CreateEvent{Object: ownedJob("a", "1"), IsInInitialList: true}, q)
		}, afterJobPriority},
		{"changed", func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), crevent.UpdateEvent{ObjectOld: ownedJob("a", "1"), ObjectNew: ownedJob("a", "2")}, q)
		}, 0},
		{"resynced unchanged", func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), crevent.UpdateEvent{ObjectOld: ownedJob("a", "1"), ObjectNew: ownedJob("a", "1")}, q)
		}, handler.LowPriority},
		{"deleted", func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(context.Background(), crevent.DeleteEvent{Object: ownedJob("a", "1")}, q)
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			tc.send(testJobEvents(t), q)
			item, p, _ := q.GetWithPriority()
			if want := (reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}); item != want || p != tc.wantP {
				t.Fatalf("got %v at priority %d, want %v at %d", item, p, want, tc.wantP)
			}
			q.Done(item)
			if q.Len() != 0 {
				t.Fatalf("%d more items queued", q.Len())
			}
		})
	}
}

// TestJobCreatedComesAfterWaitingRuns: with runs waiting for their Jobs,
// live and from the backlog, a created Job's run is handed out last, and
// a later event of that run (its Pod) raises it again.
func TestJobCreatedComesAfterWaitingRuns(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	testJobEvents(t).Create(context.Background(), crevent.CreateEvent{Object: ownedJob("started", "1")}, q)
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req("backlog"))
	q.Add(req("live"))
	var order []string
	for range 3 {
		item, _, _ := q.GetWithPriority()
		order = append(order, item.Name)
		q.Done(item)
	}
	if want := []string{"live", "backlog", "started"}; !slices.Equal(order, want) {
		t.Fatalf("handed out %v, want %v", order, want)
	}

	testJobEvents(t).Create(context.Background(), crevent.CreateEvent{Object: ownedJob("started", "1")}, q)
	q.Add(req("started")) // its Pod's event
	q.Add(req("live-2"))
	item, p, _ := q.GetWithPriority()
	if item.Name != "started" || p != 0 {
		t.Fatalf("got %s at %d, want the run raised by its Pod's event first, at 0", item.Name, p)
	}
}

// TestAtMostPlainQueue: a queue that is not a priority queue is used as is.
func TestAtMostPlainQueue(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if got := atMost(q, afterJobPriority); got != q {
		t.Fatalf("atMost wrapped a plain queue: %T", got)
	}
}
