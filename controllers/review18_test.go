package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// TestReview18PatchConfigMapRefused: a ConfigMap the API server keeps
// refusing (here a ResourceQuota of no ConfigMaps, as a namespace that
// holds many runs' patches reaches) must not hold the run in its harvest
// forever: the manager tries again for a while, then ends the run with
// status.git.detail saying why the patch is not kept.
func TestReview18PatchConfigMapRefused(t *testing.T) {
	h := newHarness(t)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-configmaps", Namespace: h.ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}}
	if err := h.c.Create(h.ctx, q); err != nil {
		t.Fatal(err)
	}
	// envtest has no quota controller: the status it would write.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}
	if err := h.c.Status().Update(h.ctx, q); err != nil {
		t.Fatal(err)
	}
	h.createRun("quota", gitSpec(nil))
	pod := h.startPod(h.job("quota"))
	h.logs.setContainer(h.ns, pod.Name, podcontract.PatchContainer, patchLog(t, []byte("From x\n")), nil)
	h.setStatus(pod, patchDone(h.clock.Now()))
	// While the API server may still change its mind, the run waits.
	h.consistently("no harvest while the ConfigMap may still be created", 500*time.Millisecond, func() string {
		if isTerminal(h.get("quota").Status) {
			return "harvested without trying again"
		}
		return ""
	})
	h.clock.Step(2*h.graces.EventLog + time.Second)
	h.poke("quota")
	got := h.phaseIs("quota", v1alpha1.PhaseSucceeded)
	if g := got.Status.Git; g == nil || g.PatchConfigMap != "" || !strings.Contains(g.Detail, "the patch is not kept") ||
		!strings.Contains(g.Detail, "exceeded quota") {
		t.Errorf("status.git %+v, want a detail that says the quota refused the patch's ConfigMap", g)
	}
	h.waitEvent("quota", "Warning/PatchNotKept")
}
