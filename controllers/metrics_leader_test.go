package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestGaugesOnTheLeaderOnly: a replica that does not lead reports no
// gauges of runs (every replica caches them, and a sum over replicas would
// count each run once per replica); once it leads, it does.
func TestGaugesOnTheLeaderOnly(t *testing.T) {
	h := newHarness(t)
	h.stopController()
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "waiting", Namespace: h.ns},
		Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Prompt: v1alpha1.PromptSource{Text: ptr.To("hi")},
			PodOverrides: &v1alpha1.PodOverrides{Labels: map[string]string{KueueQueueLabel: "q"}}}}
	if err := h.c.Create(h.ctx, run); err != nil {
		t.Fatal(err)
	}
	// Another replica leads.
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "agentrun-gauges-test", Namespace: h.ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-other-replica"), LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &now, RenewTime: &now}}
	if err := h.c.Create(h.ctx, lease); err != nil {
		t.Fatal(err)
	}
	cacheOpts := CacheOptions()
	cacheOpts.DefaultNamespaces = map[string]cache.Config{h.ns: {}}
	mgr, err := ctrl.NewManager(envCfg, ctrl.Options{
		Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller:     config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection: true, LeaderElectionID: lease.Name, LeaderElectionNamespace: h.ns,
		LeaseDuration: ptr.To(2 * time.Second), RenewDeadline: ptr.To(time.Second), RetryPeriod: ptr.To(200 * time.Millisecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &AgentRunReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorderFor("agentrun-controller"),
		Clock: h.clock, Logs: h.logs, Graces: h.graces, Job: JobConfig{RunnerImage: "agentrun-runner:test", ProgressPort: h.port}}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	inProgress := func() float64 {
		return gauge(t, "agentrun_runs", h.ns, "Pending") + gauge(t, "agentrun_runs", h.ns, "Queued")
	}
	h.consistently("no gauges from a replica that does not lead", 2*time.Second, func() string {
		if n := inProgress(); n != 0 {
			return fmt.Sprintf("%v runs in progress reported", n)
		}
		return ""
	})
	if err := h.c.Delete(h.ctx, lease); err != nil {
		t.Fatal(err)
	}
	h.eventually("the new leader reports the run", func() string {
		if n := inProgress(); n != 1 {
			return fmt.Sprintf("%v runs in progress reported", n)
		}
		return ""
	})
}
