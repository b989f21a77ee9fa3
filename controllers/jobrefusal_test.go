package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
)

// stalledIs waits until the run's Stalled condition has reason and a
// message with want, and returns the run.
func (h *harness) stalledIs(name, reason, want string) *v1alpha1.AgentRun {
	h.t.Helper()
	var run *v1alpha1.AgentRun
	h.eventually(name+" Stalled "+reason, func() string {
		run = h.get(name)
		c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionStalled)
		r := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionReconciling)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || !strings.Contains(c.Message, want) ||
			r == nil || r.Status != metav1.ConditionTrue || r.Reason != reason {
			return "Stalled " + stringOf(c) + ", Reconciling " + stringOf(r)
		}
		return ""
	})
	return run
}

func stringOf(c *metav1.Condition) string {
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

// TestJobRefusedByQuota: a ResourceQuota that allows no more Jobs makes
// the API server refuse the run's Job with 403 Forbidden. The run says so
// (Pending, Stalled and Reconciling with reason JobRefused and the
// server's message, a Warning Event) instead of retrying in silence, gets
// its Job soon after the quota has room, and, while the refusal lasts,
// ends with reason JobRefused once the start-up grace is over.
func TestJobRefusedByQuota(t *testing.T) {
	h := newHarness(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "no-jobs"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}}
	if err := h.c.Create(h.ctx, quota); err != nil {
		t.Fatal(err)
	}
	// The quota admission plugin enforces a quota once its status has
	// been computed, which the quota controller does in a cluster; the
	// test plays it.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}
	if err := h.c.Status().Update(h.ctx, quota); err != nil {
		t.Fatal(err)
	}

	h.createRun("quota", nil)
	run := h.stalledIs("quota", v1alpha1.ReasonJobRefused, "exceeded quota: no-jobs")
	if run.Status.Phase != v1alpha1.PhasePending || run.Status.JobName != "" {
		t.Errorf("phase %s job %q: want Pending without a Job", run.Status.Phase, run.Status.JobName)
	}
	ev := h.waitEvent("quota", "Warning/JobRefused")
	if !strings.Contains(ev, "forbidden") {
		t.Errorf("event %q: want the server's answer", ev)
	}
	if h.jobCount() != 0 {
		t.Fatal("a Job exists despite the quota")
	}

	// Room again: the backoff brings the run back within seconds.
	if err := h.c.Delete(h.ctx, quota); err != nil {
		t.Fatal(err)
	}
	h.job("quota")
	h.eventually("the refusal is over", func() string {
		c := meta.FindStatusCondition(h.get("quota").Status.Conditions, v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionFalse {
			return stringOf(c)
		}
		return ""
	})

	// A refusal that lasts ends the run once the grace is over.
	quota = &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "no-more-jobs"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("1")}}}
	if err := h.c.Create(h.ctx, quota); err != nil {
		t.Fatal(err)
	}
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{"count/jobs.batch": resource.MustParse("1")}}
	if err := h.c.Status().Update(h.ctx, quota); err != nil {
		t.Fatal(err)
	}
	h.createRun("lasting", nil)
	h.stalledIs("lasting", v1alpha1.ReasonJobRefused, "exceeded quota: no-more-jobs")
	h.clock.Step(h.graces.Startup + time.Second)
	h.poke("lasting")
	run = h.phaseIs("lasting", v1alpha1.PhaseFailed)
	if c := succeeded(run); c.Reason != v1alpha1.ReasonJobRefused || !strings.Contains(run.Status.Detail, "exceeded quota: no-more-jobs") ||
		run.Status.EndStatus != events.StatusFailed {
		t.Errorf("Succeeded %s, endStatus %s, detail %q", stringOf(c), run.Status.EndStatus, run.Status.Detail)
	}
	h.waitEvent("lasting", "Warning/JobRefused: end status failed: the API server refused to create the run's Job for")
}

// TestJobRejectedByPolicy: an admission policy that refuses the Job as
// invalid (a ValidatingAdmissionPolicy's default, 422) ends the run at once
// with reason JobRejected and the server's message, as a spec that cannot
// make a valid Job does; one that refuses it as Forbidden (403) is a
// refusal that may pass (JobRefused), retried.
func TestJobRejectedByPolicy(t *testing.T) {
	h := newHarness(t)
	deny := func(name, label string, reason *metav1.StatusReason) {
		t.Helper()
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: h.ns + "-" + name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.metadata.labels) || !('" + label + "' in object.metadata.labels)",
					Message: "jobs labelled " + label + " are not allowed here", Reason: reason}}}}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": h.ns}}}}}
		if err := h.c.Create(h.ctx, vap); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Create(h.ctx, binding); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := h.c.Delete(h.ctx, binding); err != nil {
				t.Error(err)
			}
			if err := h.c.Delete(h.ctx, vap); err != nil {
				t.Error(err)
			}
		})
	}
	deny("invalid", "test/invalid", nil)
	deny("forbidden", "test/forbidden", ptr.To(metav1.StatusReasonForbidden))
	labelled := func(l string) func(*v1alpha1.AgentRunSpec) {
		return func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{Labels: map[string]string{l: "x"}}
		}
	}
	// The policies take effect a moment after their creation: a dry-run
	// create of a Job with each label says when.
	for _, l := range []string{"test/forbidden", "test/invalid"} {
		h.eventually("the policy on "+l+" is enforced", func() string {
			probe := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "probe", Labels: map[string]string{l: "x"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
			if err := h.c.Create(h.ctx, probe, client.DryRunAll); err == nil {
				return "a Job labelled " + l + " is still admitted"
			}
			return ""
		})
	}
	h.createRun("forbidden", labelled("test/forbidden"))
	h.stalledIs("forbidden", v1alpha1.ReasonJobRefused, "jobs labelled test/forbidden are not allowed here")
	h.waitEvent("forbidden", "Warning/JobRefused")

	h.createRun("invalid", labelled("test/invalid"))
	run := h.phaseIs("invalid", v1alpha1.PhaseFailed)
	if c := succeeded(run); c.Reason != v1alpha1.ReasonJobRejected || !strings.Contains(run.Status.Detail, "jobs labelled test/invalid are not allowed here") {
		t.Errorf("Succeeded %s, detail %q", stringOf(c), run.Status.Detail)
	}
	h.waitEvent("invalid", "Warning/JobRejected")
}

func TestJobRefusalIsFinal(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	terminating := apierrors.NewForbidden(gr, "j", nil)
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name  string
		err   error
		final bool
	}{
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "j", nil), true},
		{"bad request", apierrors.NewBadRequest("no"), true},
		{"too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		{"namespace terminating", terminating, true},
		{"quota or webhook", apierrors.NewForbidden(gr, "j", nil), false},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), false},
		{"webhook down", apierrors.NewInternalError(errors.New("failed calling webhook")), false},
		{"unavailable", apierrors.NewServiceUnavailable("later"), false},
		{"timeout", apierrors.NewTimeoutError("later", 1), false},
	} {
		if got := jobRefusalIsFinal(tc.err); got != tc.final {
			t.Errorf("%s: final %v, want %v", tc.name, got, tc.final)
		}
	}
	for _, tc := range []struct{ elapsed, want time.Duration }{
		{0, time.Second}, {3 * time.Second, 3 * time.Second}, {time.Hour, time.Minute},
	} {
		if got := jobRetry(tc.elapsed); got != tc.want {
			t.Errorf("jobRetry(%s) = %s, want %s", tc.elapsed, got, tc.want)
		}
	}
}
