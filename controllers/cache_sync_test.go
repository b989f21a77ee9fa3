package controllers

import (
	"context"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fakeInformer syncs after a number of looks at it.
type fakeInformer struct {
	cache.Informer
	looksLeft atomic.Int32
}

func (i *fakeInformer) HasSynced() bool { return i.looksLeft.Add(-1) < 0 }

// fakeCache hands out one informer per kind and records what its own
// WaitForCacheSync saw.
type fakeCache struct {
	cache.Cache
	informers map[string]*fakeInformer
	// allSyncedAtWait: every informer had synced when WaitForCacheSync was
	// asked (promptSyncCache asks it only then).
	allSyncedAtWait *bool
}

func (c *fakeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return c.informers[kindOf(obj)], nil
}

func (c *fakeCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

func (c *fakeCache) WaitForCacheSync(context.Context) bool {
	all := true
	for _, i := range c.informers {
		all = all && i.looksLeft.Load() < 0
	}
	c.allSyncedAtWait = &all
	return true
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *batchv1.Job:
		return "Job"
	case *corev1.Event:
		return "Event"
	}
	return "other"
}

// TestPromptSyncCache: the manager's cache waits for the sync of every
// informer made through it, the one an index made included, before it asks
// the cache itself (whose own look comes every 100 ms); a cancelled wait
// returns false.
func TestPromptSyncCache(t *testing.T) {
	for _, tc := range []struct {
		name      string
		jobLooks  int32 // looks before the Jobs' informer has synced
		evLooks   int32 // the Events' (made by an index)
		cancelled bool
		want      bool
	}{
		{"synced at once", 0, 0, false, true},
		{"Jobs sync later", 20, 0, false, true},
		{"the index's informer syncs last", 0, 30, false, true},
		{"cancelled before the sync", 1 << 30, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs, events := &fakeInformer{}, &fakeInformer{}
			jobs.looksLeft.Store(tc.jobLooks)
			events.looksLeft.Store(tc.evLooks)
			inner := &fakeCache{informers: map[string]*fakeInformer{"Job": jobs, "Event": events}}
			c := &promptSyncCache{Cache: inner}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, i := range []int{1, 2} { // noted once, however often it is asked for
				if _, err := c.GetInformer(ctx, &batchv1.Job{}); err != nil || len(c.informers) != 1 {
					t.Fatalf("GetInformer #%d: %v, %d noted", i, err, len(c.informers))
				}
			}
			if err := c.IndexField(ctx, &corev1.Event{}, "involvedObject.uid", nil); err != nil || len(c.informers) != 2 {
				t.Fatalf("IndexField: %v, %d noted", err, len(c.informers))
			}
			if tc.cancelled {
				cancel()
			}
			if got := c.WaitForCacheSync(ctx); got != tc.want {
				t.Fatalf("WaitForCacheSync = %v, want %v", got, tc.want)
			}
			if tc.want && (inner.allSyncedAtWait == nil || !*inner.allSyncedAtWait) {
				t.Errorf("the cache itself was asked before every informer had synced")
			}
			if !tc.want && inner.allSyncedAtWait != nil {
				t.Errorf("a cancelled wait still asked the cache")
			}
		})
	}
}

// fakeRegistration has been given the informer's objects after a number of
// looks at it.
type fakeRegistration struct {
	toolscache.ResourceEventHandlerRegistration
	looksLeft atomic.Int32
}

func (r *fakeRegistration) HasSynced() bool { return r.looksLeft.Add(-1) < 0 }

type registeringInformer struct {
	cache.Informer
	synced bool
	reg    *fakeRegistration
}

func (i *registeringInformer) HasSynced() bool { return i.synced }

func (i *registeringInformer) AddEventHandlerWithOptions(toolscache.ResourceEventHandler, toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.reg, nil
}

// TestPromptInformer: adding a handler to a synced informer returns once
// the handler has been given the informer's objects, so that the source's
// own look (every 100 ms) passes at once; to an informer not synced yet,
// at once (its objects come with its sync).
func TestPromptInformer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		synced    bool
		looks     int32
		wantLooks bool // the registration was looked at until it synced
	}{
		{"synced informer, handler given its objects later", true, 5, true},
		{"synced informer, handler at once", true, 0, true},
		{"informer not synced", false, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &fakeRegistration{}
			reg.looksLeft.Store(tc.looks)
			i := promptInformer{&registeringInformer{synced: tc.synced, reg: reg}}
			got, err := i.AddEventHandlerWithOptions(nil, toolscache.HandlerOptions{})
			if err != nil || got != toolscache.ResourceEventHandlerRegistration(reg) {
				t.Fatalf("AddEventHandlerWithOptions = %v, %v", got, err)
			}
			if synced := reg.looksLeft.Load() < 0; synced != tc.wantLooks {
				t.Errorf("returned with the handler synced %v, want %v", synced, tc.wantLooks)
			}
		})
	}
}
