package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncLook is how often the manager looks whether its cache has synced.
// client-go looks every 100 ms (WaitForCacheSync), and a manager's start
// waits for it three times: the cache's own sync, each controller's
// sources, then each source's handler, which gets the cache's objects
// after it was added (controller-runtime 0.23). A backlog's first Job
// came 200 ms after the manager started while its cache had listed
// everything in about half that (hack/scale-bench's manager log); a look
// costs a few atomic reads per informer.
const syncLook = 5 * time.Millisecond

// handlerSyncWait bounds how long adding a handler to a synced informer
// waits for the handler to have been given the informer's objects; past
// it, the caller's own (100 ms) looks take over.
const handlerSyncWait = 2 * time.Second

// NewCache is the manager's cache (ctrl.Options.NewCache): controller-
// runtime's, whose WaitForCacheSync looks every syncLook instead of every
// 100 ms.
func NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &promptSyncCache{Cache: c}, nil
}

// promptSyncCache notes every informer made through it (GetInformer, and
// IndexField's) and waits for their sync by looking every syncLook; then
// it asks the cache itself, which by then answers at its first look. The
// informers it hands out do the same for a handler added to them
// (promptInformer).
type promptSyncCache struct {
	cache.Cache
	mu        sync.Mutex
	informers []cache.Informer
}

func (c *promptSyncCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	c.note(i)
	return promptInformer{i}, nil
}

func (c *promptSyncCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err != nil {
		return nil, err
	}
	c.note(i)
	return promptInformer{i}, nil
}

// IndexField makes the kind's informer inside the cache, not through
// GetInformer: it is taken once more to be noted.
func (c *promptSyncCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if err := c.Cache.IndexField(ctx, obj, field, extract); err != nil {
		return err
	}
	_, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	return err
}

func (c *promptSyncCache) note(i cache.Informer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, known := range c.informers {
		if known == i {
			return
		}
	}
	c.informers = append(c.informers, i)
}

// synced reports whether every informer noted has synced.
func (c *promptSyncCache) synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range c.informers {
		if !i.HasSynced() {
			return false
		}
	}
	return true
}

func (c *promptSyncCache) WaitForCacheSync(ctx context.Context) bool {
	t := time.NewTicker(syncLook)
	defer t.Stop()
	for !c.synced() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return c.Cache.WaitForCacheSync(ctx)
}

var _ cache.Cache = &promptSyncCache{}

// promptInformer is an informer that, once synced, returns from adding a
// handler only when the handler has been given every object the informer
// holds (or after handlerSyncWait): a controller's source looks at that
// right after, with client-go's 100 ms look, which then passes at once.
type promptInformer struct{ cache.Informer }

func (i promptInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	reg, err := i.Informer.AddEventHandlerWithOptions(h, o)
	if err != nil || !i.HasSynced() {
		return reg, err
	}
	deadline := time.Now().Add(handlerSyncWait)
	for !reg.HasSynced() && time.Now().Before(deadline) {
		time.Sleep(syncLook)
	}
	return reg, nil
}
