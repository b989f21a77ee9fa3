package kubectlplugin

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/controllers"
	"github.com/agentrun-dev/agentrun/harvest"
)

// The plugin and the manager release the Pods the controller makes.
func TestHarvestNamesAgreeWithController(t *testing.T) {
	if harvest.Finalizer != controllers.HarvestFinalizer || harvest.Selector[controllers.LabelManagedBy] != controllers.ManagedBy || len(harvest.Selector) != 1 {
		t.Errorf("harvest: %s %v; controller: %s %s=%s", harvest.Finalizer, harvest.Selector, controllers.HarvestFinalizer, controllers.LabelManagedBy, controllers.ManagedBy)
	}
}

// heldPod makes a Pod with finalizers; agent labels it as the manager's.
func (c *cluster) heldPod(name string, agent bool, finalizers ...string) *corev1.Pod {
	c.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name, Finalizers: finalizers},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}
	if agent {
		p.Labels = map[string]string{controllers.LabelManagedBy: controllers.ManagedBy}
	}
	if err := c.c.Create(c.ctx, p); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// TestRelease: with no manager, an agent Pod deleted under its run stays
// Terminating on the harvest finalizer; `release` removes that finalizer
// alone (the Job controller's stays), in the namespace or in all, and
// leaves Pods that are not the manager's.
func TestRelease(t *testing.T) {
	cl := newCluster(t)
	other := newCluster(t)
	const jobTracking = "batch.kubernetes.io/job-tracking"
	stuck := cl.heldPod("stuck", true, harvest.Finalizer, jobTracking)
	if err := cl.c.Delete(cl.ctx, stuck); err != nil {
		t.Fatal(err)
	}
	cl.heldPod("running", true, harvest.Finalizer)
	cl.heldPod("plain", true)
	foreign := cl.heldPod("foreign", false, harvest.Finalizer)
	far := other.heldPod("far", true, harvest.Finalizer)

	r := cl.plugin("release", "-n", cl.ns)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	slices.Sort(lines)
	if want := []string{"pod/running released (namespace " + cl.ns + ")", "pod/stuck released (namespace " + cl.ns + ")"}; !slices.Equal(lines, want) {
		t.Errorf("stdout %q, want %q", lines, want)
	}
	finalizers := func(c *cluster, name string) []string {
		t.Helper()
		p := &corev1.Pod{}
		if err := c.c.Get(c.ctx, client.ObjectKey{Namespace: c.ns, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return p.Finalizers
	}
	if f := finalizers(cl, "stuck"); !slices.Equal(f, []string{jobTracking}) {
		t.Errorf("stuck: finalizers %v, want the Job controller's alone", f)
	}
	if f := finalizers(cl, "running"); len(f) != 0 {
		t.Errorf("running: finalizers %v", f)
	}
	if f := finalizers(cl, foreign.Name); !slices.Equal(f, []string{harvest.Finalizer}) {
		t.Errorf("a Pod that is not the manager's: finalizers %v", f)
	}
	if f := finalizers(other, far.Name); !slices.Equal(f, []string{harvest.Finalizer}) {
		t.Errorf("another namespace: finalizers %v", f)
	}
	// The deleted Pod goes once the Job controller's finalizer goes too.
	p := &corev1.Pod{}
	if err := cl.c.Get(cl.ctx, client.ObjectKeyFromObject(stuck), p); err != nil {
		t.Fatal(err)
	}
	p.Finalizers = nil
	if err := cl.c.Update(cl.ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Get(cl.ctx, client.ObjectKeyFromObject(stuck), p); !apierrors.IsNotFound(err) {
		t.Errorf("the released Pod is still there: %v", err)
	}

	if r := cl.plugin("release", "-n", cl.ns); r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No agent Pod holds") {
		t.Errorf("again: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cl.plugin("release", "-A"); r.code != 0 || !strings.Contains(r.stdout, "pod/far released (namespace "+other.ns+")") {
		t.Errorf("-A: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if f := finalizers(other, far.Name); len(f) != 0 {
		t.Errorf("-A: far keeps %v", f)
	}
	if r := cl.plugin("release", "extra"); r.code != exitUsage {
		t.Errorf("an argument: exit %d", r.code)
	}
}
