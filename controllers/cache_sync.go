package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncLook is how often the manager looks whether its cache has synced.
// client-go looks every 100 ms (WaitForCacheSync), and a manager's start
// waits for it twice: the cache's own sync, then each controller's
// sources. A backlog's first Job came 200 ms after the manager started
// while its cache had listed everything in about half that
// (hack/scale-bench's manager log); a look costs a few atomic reads per
// informer.
const syncLook = 5 * time.Millisecond

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
// it asks the cache itself, which by then answers at its first look.
type promptSyncCache struct {
	cache.Cache
	mu        sync.Mutex
	informers []cache.Informer
}

func (c *promptSyncCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err == nil {
		c.note(i)
	}
	return i, err
}

func (c *promptSyncCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err == nil {
		c.note(i)
	}
	return i, err
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
