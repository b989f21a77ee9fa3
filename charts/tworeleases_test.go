package charts

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestTwoReleases installs the chart twice on one API server, as
// docs/kubernetes/install.md says a second release goes: disjoint
// watchNamespaces, release "a" owning the cluster-wide objects (the CRDs,
// the policy, the sandbox profiles and their guard, which admits both
// managers), release "b" with crds.install, policy.enabled,
// sandboxProfiles.guard off and sandboxProfiles.installer none. Helm
// refuses to install an object another release owns, so both installs
// succeeding is the proof that the releases' objects are disjoint; then
// each manager has its own leader lease and watched namespace, and the
// guard admits a sandboxed Job from either manager and from no one else.
func TestTwoReleases(t *testing.T) {
	isolateHelm(t)
	ctx := context.Background()
	c := startCluster(t)
	admin, _ := policyClient(t, c.cfg)
	for _, ns := range []string{"team-a", "team-b"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	c.helm("install", "a", "charts/agentrun", "--namespace", "agentrun-a", "--create-namespace",
		"--set-json", `watchNamespaces=["team-a"]`, "--set-json", `sandboxProfiles.guardOtherManagers=["agentrun-b:b-manager"]`)
	c.helm("install", "b", "charts/agentrun", "--namespace", "agentrun-b", "--create-namespace",
		"--set-json", `watchNamespaces=["team-b"]`, "--set", "crds.install=false", "--set", "policy.enabled=false",
		"--set", "sandboxProfiles.guard=false", "--set", "sandboxProfiles.installer=none")

	// One owner of the cluster-wide objects.
	owner := c.must(c.kubectl, "get", "crd", "agentruns.agentrun.dev", "-o", `jsonpath={.metadata.annotations.meta\.helm\.sh/release-name}`)
	if owner != "a" {
		t.Errorf("the AgentRun CRD belongs to release %q, want a", owner)
	}

	// Each manager: its own lease, its own namespace.
	args := map[string]string{}
	for _, r := range []struct{ ns, name string }{{"agentrun-a", "a-manager"}, {"agentrun-b", "b-manager"}} {
		d := &appsv1.Deployment{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name}, d); err != nil {
			t.Fatal(err)
		}
		args[r.name] = strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	}
	for name, want := range map[string][]string{
		"a-manager": {"--leader-election-id=a-manager.agentrun.dev", "--watch-namespaces=team-a"},
		"b-manager": {"--leader-election-id=b-manager.agentrun.dev", "--watch-namespaces=team-b"},
	} {
		for _, w := range want {
			if !strings.Contains(args[name], w) {
				t.Errorf("%s's arguments %q lack %s", name, args[name], w)
			}
		}
	}

	// The guard of release a admits both managers' sandboxed Jobs.
	as := func(user string, groups ...string) client.Client { return impersonating(t, c.cfg, user, groups...) }
	sandboxedJob := func(ns string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "j-"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun/bwrap.json")}}}}}}}}
	}
	const refusal = "are for agentrun's agent Pods only"
	waitFor(t, "the guard is in force", time.Minute, func() string {
		return refusedWith(admin.Create(ctx, sandboxedJob("team-a"), client.DryRunAll), refusal)
	})
	for _, m := range []struct{ user, ns string }{
		{"system:serviceaccount:agentrun-a:a-manager", "team-a"},
		{"system:serviceaccount:agentrun-b:b-manager", "team-b"},
	} {
		k := as(m.user, "system:serviceaccounts")
		if err := k.Create(ctx, sandboxedJob(m.ns), client.DryRunAll); err != nil {
			t.Errorf("a sandboxed Job from %s: %v, want it admitted", m.user, err)
		}
	}
	// Another account of release b's namespace, allowed everything by
	// RBAC, is still refused by the guard.
	other := as("system:serviceaccount:agentrun-b:default", "system:serviceaccounts", "system:masters")
	if why := refusedWith(other.Create(ctx, sandboxedJob("team-b"), client.DryRunAll), refusal); why != "" {
		t.Errorf("a sandboxed Job from another account: %s, want the guard's refusal", why)
	}
}
