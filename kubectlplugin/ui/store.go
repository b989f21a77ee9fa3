package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// The resources the ui watches.
var (
	agentRunsResource    = v1alpha1.GroupVersion.WithResource("agentruns")
	agentBudgetsResource = v1alpha1.GroupVersion.WithResource("agentbudgets")
)

// store is one kind's objects as a watch keeps them (client-go's
// informer: one list, then one watch, relisting when the watch breaks),
// with the user's credentials: what RBAC lets the user list and watch is
// what the pages show. Pages subscribe to changes instead of polling: a
// subscriber is told which objects changed, and reads them from the store.
type store[T any] struct {
	what     string // "AgentRuns", for messages
	ns       string // "" for every namespace
	informer cache.SharedIndexInformer

	mu     sync.Mutex
	err    error // the last list or watch failure, until a list succeeds
	subs   map[*subscription]struct{}
	synced bool
}

// newStore watches a resource in ns ("" for all) through the dynamic
// client and keeps what convert makes of each object. convert also drops
// what the pages never show, so 1,000 runs stay small.
func newStore[T any](dc dynamic.Interface, gvr schema.GroupVersionResource, ns, what string,
	convert func(*unstructured.Unstructured) (*T, error)) *store[T] {
	inf := dynamicinformer.NewFilteredDynamicInformer(dc, gvr, ns, 0, cache.Indexers{}, nil).Informer()
	s := &store[T]{what: what, ns: ns, informer: inf, subs: map[*subscription]struct{}{}}
	_ = inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // a tombstone: client-go unwraps it itself
		}
		t, err := convert(u)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", what, u.GetNamespace(), u.GetName(), err)
		}
		return &keyed[T]{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion()}, obj: t}, nil
	})
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		s.notifyAll()
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.changed(obj) },
		UpdateFunc: func(_, obj any) { s.changed(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			s.changed(obj)
		},
	})
	return s
}

// keyed is the object as the informer's cache holds it: the converted
// value, with the metadata client-go's key functions read.
type keyed[T any] struct {
	metav1.ObjectMeta
	obj *T
}

// run runs the watch until ctx ends.
func (s *store[T]) run(ctx context.Context) {
	go s.informer.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
			s.mu.Lock()
			s.synced, s.err = true, nil
			s.mu.Unlock()
			s.notifyAll()
		}
	}()
}

// state says whether the store has its first list, and the last failure
// to list or watch (an RBAC refusal, say) while it has none or since.
func (s *store[T]) state() (synced bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced, s.err
}

// problem is the failure a page shows, in words: a refused list says
// which permission is missing.
func (s *store[T]) problem() string {
	synced, err := s.state()
	if err == nil {
		return ""
	}
	where := "in namespace " + s.ns
	if s.ns == "" {
		where = "in all namespaces (-A)"
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("Your credentials may not list and watch %s %s: %v", s.what, where, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("The API server did not accept your credentials: %v", err)
	case !synced:
		return fmt.Sprintf("Cannot list %s %s yet (retrying): %v", s.what, where, err)
	}
	return "" // the watch broke after the first list: client-go lists again
}

// list is every object in the store.
func (s *store[T]) list() []*keyed[T] {
	items := s.informer.GetStore().List()
	out := make([]*keyed[T], 0, len(items))
	for _, it := range items {
		if k, ok := it.(*keyed[T]); ok {
			out = append(out, k)
		}
	}
	return out
}

// get is one object by namespace and name.
func (s *store[T]) get(ns, name string) *keyed[T] {
	it, ok, err := s.informer.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	k, _ := it.(*keyed[T])
	return k
}

// changed tells every subscriber that the object obj is changed (added,
// updated or deleted).
func (s *store[T]) changed(obj any) {
	k, ok := obj.(*keyed[T])
	if !ok {
		return
	}
	key := k.Namespace + "/" + k.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.mark(key, k.UID)
	}
}

func (s *store[T]) notifyAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.markAll()
	}
}

// subscribe returns a subscription to the store's changes; cancel ends it.
func (s *store[T]) subscribe() (sub *subscription, cancel func()) {
	sub = &subscription{ready: make(chan struct{}, 1), keys: map[string]types.UID{}}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub, func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
	}
}

// subscription collects the keys of changed objects until its reader
// takes them: a burst of changes to one run is one change to the reader,
// and a slow page never holds up the watch.
type subscription struct {
	ready chan struct{}
	mu    sync.Mutex
	keys  map[string]types.UID // namespace/name to the uid last seen
	all   bool                 // the state changed, or many things did: reread everything
}

// maxPending is how many changed keys a subscription collects before it
// asks its reader to read everything again instead.
const maxPending = 2000

func (s *subscription) mark(key string, uid types.UID) {
	s.mu.Lock()
	if len(s.keys) < maxPending {
		s.keys[key] = uid
	} else {
		s.all = true
	}
	s.mu.Unlock()
	s.wake()
}

func (s *subscription) markAll() {
	s.mu.Lock()
	s.all = true
	s.mu.Unlock()
	s.wake()
}

func (s *subscription) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns what changed since the last take.
func (s *subscription) take() (keys map[string]types.UID, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, all = s.keys, s.all
	s.keys, s.all = map[string]types.UID{}, false
	return keys, all
}

// convertTyped makes the typed object of an unstructured one. Fields
// this build's types do not know are dropped (see newer.go for the ones
// the pages read anyway).
func convertTyped[T any](u *unstructured.Unstructured) (*T, error) {
	obj := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// throttle is how long a page's stream waits after a change before it
// sends: changes that come together go out together.
const throttle = 150 * time.Millisecond
