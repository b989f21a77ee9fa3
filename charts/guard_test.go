package charts

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSandboxProfileGuard installs the chart with its defaults and checks
// the guard of the sandbox profiles against a real API server: a Pod, a
// Job or a debug container naming agentrun/bwrap.json is refused unless
// the Job comes from the manager and the Pod from the Job controller, as
// the Pods of AgentRuns do; everything else is untouched.
func TestSandboxProfileGuard(t *testing.T) {
	isolateHelm(t)
	ctx := context.Background()
	c := startCluster(t)
	admin, _ := policyClient(t, c.cfg)
	c.helm("install", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--create-namespace")
	as := func(user string, groups ...string) client.Client { return impersonating(t, c.cfg, user, groups...) }
	jobController := as("system:serviceaccount:kube-system:job-controller", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	manager := as("system:serviceaccount:agentrun-system:agentrun-manager", "system:serviceaccounts", "system:serviceaccounts:agentrun-system")

	profile := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun/bwrap.json")}
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "p-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	inContainer := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: profile}
	}
	job := func(podEdit func(*corev1.Pod)) *batchv1.Job {
		p := pod(podEdit)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "j-"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: p.Spec}}}
	}
	dryRun := func(k client.Client, obj client.Object) error {
		return k.Create(ctx, obj, client.DryRunAll)
	}
	const refusal = "are for agentrun's agent Pods only"
	waitFor(t, "the guard is in force", time.Minute, func() string {
		return refusedWith(dryRun(admin, pod(inContainer)), refusal)
	})

	for _, tc := range []struct {
		name    string
		k       client.Client
		obj     client.Object
		refused bool
	}{
		{"a Pod naming the profile in a container", admin, pod(inContainer), true},
		{"a Pod naming it for the whole Pod", admin, pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: profile}
		}), true},
		{"a Pod naming it in an init container", admin, pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "busybox", SecurityContext: &corev1.SecurityContext{SeccompProfile: profile}}}
		}), true},
		{"a Pod with another Localhost profile", admin, pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("team/profile.json")}}
		}), false},
		{"a Pod without profiles", admin, pod(nil), false},
		{"the Job controller's Pod for an agent Job", jobController, pod(inContainer), false},
		{"a Job naming the profile, from a user", admin, job(inContainer), true},
		{"a Job naming the profile, from the manager", manager, job(inContainer), false},
		{"a Job without it, from a user", admin, job(nil), false},
	} {
		err := dryRun(tc.k, tc.obj)
		if tc.refused {
			if why := refusedWith(err, refusal); why != "" {
				t.Errorf("%s: %s, want the guard's refusal", tc.name, why)
			}
		} else if err != nil {
			t.Errorf("%s: %v, want it admitted", tc.name, err)
		}
	}

	// A debug container naming the profile, added to a running Pod.
	target := pod(nil)
	if err := admin.Create(ctx, target); err != nil {
		t.Fatal(err)
	}
	target.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debug", Image: "busybox", SecurityContext: &corev1.SecurityContext{SeccompProfile: profile}}}}
	err := admin.SubResource("ephemeralcontainers").Update(ctx, target)
	if err == nil || !strings.Contains(err.Error(), "debug containers may not use agentrun's sandbox profiles") {
		t.Errorf("a debug container with the profile: %v", err)
	}
	target.Spec.EphemeralContainers[0].SecurityContext = nil
	if err := admin.SubResource("ephemeralcontainers").Update(ctx, target); err != nil {
		t.Errorf("a debug container without it: %v", err)
	}

	// With the AppArmor profile too: naming it alone is as guarded.
	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--set", "sandboxProfiles.appArmor.enabled=true")
	apparmor := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{
			Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun-bwrap")}}
	}
	waitFor(t, "the guard covers AppArmor", time.Minute, func() string {
		return refusedWith(dryRun(admin, pod(apparmor)), refusal)
	})
	if err := dryRun(jobController, pod(apparmor)); err != nil {
		t.Errorf("the Job controller's Pod with the AppArmor profile: %v", err)
	}
}
