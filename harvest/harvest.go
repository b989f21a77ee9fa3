// Package harvest is the finalizer that keeps an agent's Pod until the
// manager has copied the run's end into its AgentRun, and the way out when
// no manager will: Release.
//
// The Pod's termination message and its events container's log are where
// the end lives until the manager has read it, and a deleted Pod loses
// both; the finalizer keeps a Pod deleted under a running run (a drain, a
// cancel, a foreground deletion) until the harvest. The agent's Pod has no
// API token and must keep none, so only the manager removes it. When the
// manager is gone for good (the chart uninstalled, its namespace deleted)
// or stays down (a crash loop), such Pods would stay Terminating, and with
// them a namespace being deleted and an AgentRun deleted in the
// foreground. Release removes the finalizer: the chart runs it before an
// uninstall (`manager --release-harvest-finalizers`, a pre-delete hook),
// and an operator runs it by hand (`kubectl agentrun release`), giving up
// the end of the runs whose Pods are deleted before a manager reads them.
package harvest

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Finalizer is on every agent Pod from its creation (the Job's Pod
// template) until the manager has the run's end in status.
const Finalizer = "agentrun.dev/harvest"

// Selector is the label every agent Pod carries (the manager's cache
// selects Jobs and Pods by it).
var Selector = client.MatchingLabels{"app.kubernetes.io/managed-by": "agentrun"}

// Release removes Finalizer from the agent Pods of namespace ("" for every
// namespace) and returns the Pods it released. A Pod is patched with its
// resourceVersion (the Job controller edits the same list; a conflict is
// read again and retried), so only this finalizer goes. A Pod gone
// meanwhile is skipped.
func Release(ctx context.Context, c client.Client, namespace string) ([]client.ObjectKey, error) {
	pods := &corev1.PodList{}
	opts := []client.ListOption{Selector}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, pods, opts...); err != nil {
		return nil, fmt.Errorf("listing the agent Pods: %w", err)
	}
	var released []client.ObjectKey
	for i := range pods.Items {
		p := &pods.Items[i]
		if !slices.Contains(p.Finalizers, Finalizer) {
			continue
		}
		key := client.ObjectKeyFromObject(p)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, key, p); err != nil {
				return err
			}
			if !slices.Contains(p.Finalizers, Finalizer) {
				return nil
			}
			base := p.DeepCopy()
			p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == Finalizer })
			return c.Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return released, fmt.Errorf("releasing Pod %s: %w", key, err)
		}
		released = append(released, key)
	}
	return released, nil
}
