package charts

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestReviewGuardProfileSpellings (review of issue 21): the kubelet opens
// a Localhost seccomp profile at filepath.Join(<root>/seccomp,
// localhostProfile), which cleans the path, and the API server accepts any
// relative path without a ".." element. So "agentrun//bwrap.json",
// "agentrun/./bwrap.json", "./agentrun/bwrap.json" and
// "agentrun/bwrap.json/" all name the sandbox's profile on the node; the
// guard, which compares the string with "agentrun/bwrap.json", must refuse
// them as it refuses the plain spelling, for Pods and Jobs alike.
func TestReviewGuardProfileSpellings(t *testing.T) {
	isolateHelm(t)
	ctx := context.Background()
	c := startCluster(t)
	admin, _ := policyClient(t, c.cfg)
	c.helm("install", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--create-namespace")
	pod := func(profile string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "p-"},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox",
				SecurityContext: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
					Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(profile)}}}}}}
	}
	const refusal = "are for agentrun's agent Pods only"
	waitFor(t, "the guard is in force", time.Minute, func() string {
		return refusedWith(admin.Create(ctx, pod("agentrun/bwrap.json"), client.DryRunAll), refusal)
	})
	for _, spelling := range []string{"agentrun//bwrap.json", "agentrun/./bwrap.json", "./agentrun/bwrap.json", "agentrun/bwrap.json/", ".//agentrun/.//bwrap.json"} {
		if why := refusedWith(admin.Create(ctx, pod(spelling), client.DryRunAll), refusal); why != "" {
			t.Errorf("a Pod naming the sandbox profile as %q: %s, want the guard's refusal", spelling, why)
		}
		p := pod(spelling)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "j-"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: p.Spec}}}
		if why := refusedWith(admin.Create(ctx, job, client.DryRunAll), refusal); why != "" {
			t.Errorf("a Job naming the sandbox profile as %q: %s, want the guard's refusal", spelling, why)
		}
	}
	// Another profile in the same directory stays the admin's business.
	if err := admin.Create(ctx, pod("agentrun/other.json"), client.DryRunAll); err != nil {
		t.Errorf("another profile: %v", err)
	}
}
