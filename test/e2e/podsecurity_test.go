//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestPodSecurityNamespaces: with the chart's defaults, an AgentRun
// without podOverrides runs sandboxed, the network enforced, in a
// namespace enforcing Pod Security "restricted" and in one enforcing
// "baseline"; the admin policy, on by default in every namespace, refuses
// what Pod Security accepts (an annotation on which a webhook would inject
// a cloud token) with its message; a Pod the namespace refuses is reported
// as PodRejected instead of a silent Pending.
func TestPodSecurityNamespaces(t *testing.T) {
	t.Parallel()
	srv, port := startMock(t, mockmodel.Options{})
	namespaces := map[string]map[string]string{
		"e2e-restricted": {"pod-security.kubernetes.io/enforce": "restricted"},
		"e2e-baseline":   {"pod-security.kubernetes.io/enforce": "baseline"},
	}
	for ns, labels := range namespaces {
		makeNamespace(t, ns, labels)
	}
	t.Cleanup(func() {
		// After the parallel subtests: two sample runs of two calls
		// each; the refused, rejected and profile-less runs reached
		// nothing.
		if n := len(srv.Ledger()); n != 4 && !t.Failed() {
			t.Errorf("the mock served %d calls, want 4", n)
		}
	})
	for ns := range namespaces {
		t.Run(ns, func(t *testing.T) {
			t.Parallel()
			const name = "sample"
			applyIn(t, ns, claudeRun(name, "parallel", port).manifest())
			run := waitEndedIn(t, ns, name, 3*time.Minute)
			st := run.Status
			if st.Phase != v1alpha1.PhaseSucceeded || st.Result == nil || *st.Result != parallelResult {
				t.Fatalf("phase %s (%s) detail %q result %v", st.Phase, succeeded(run), st.Detail, st.Result)
			}
			want := v1alpha1.Isolation{Sandbox: v1alpha1.SandboxBubblewrap, NetworkMode: v1alpha1.NetworkCustom, NetworkEnforced: true}
			if st.Isolation == nil || *st.Isolation != want {
				t.Errorf("status.isolation %+v, want %+v", st.Isolation, want)
			}
			var pod corev1.Pod
			getJSON(t, &pod, "-n", ns, "get", "pod", st.PodName)
			checkAgentSecurity(t, &pod)
		})
	}
	t.Run("the policy refuses a forbidden spec", func(t *testing.T) {
		t.Parallel()
		// The sample asking EKS's webhook for an AWS role: Pod Security
		// "restricted" accepts the annotation, the default policy does not.
		m := claudeRun("irsa", "parallel", port).manifest() +
			"  podOverrides:\n    annotations:\n      eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/admin\n"
		out, err := kubeIn(strings.NewReader(m), "-n", "e2e-restricted", "apply", "-f", "-")
		const want = "spec.podOverrides.annotations eks.amazonaws.com/role-arn is not allowed by AgentRunPolicy agentrun-policy (namespace e2e-restricted)"
		if err == nil || !strings.Contains(out+err.Error(), want) {
			t.Errorf("apply: %v\n%s\nwant a refusal with %q", err, out, want)
		}
	})
	t.Run("only agent Pods may name the sandbox profile", func(t *testing.T) {
		t.Parallel()
		const pod = `apiVersion: v1
kind: Pod
metadata: {name: borrows-the-profile}
spec:
  containers:
    - name: c
      image: agentrun-pause:dev
      securityContext:
        allowPrivilegeEscalation: false
        runAsNonRoot: true
        runAsUser: 1000
        capabilities: {drop: [ALL]}
        seccompProfile: {type: Localhost, localhostProfile: agentrun/bwrap.json}
`
		out, err := kubeIn(strings.NewReader(pod), "-n", "e2e-restricted", "apply", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), "are for agentrun's agent Pods only") {
			t.Errorf("a Pod of the test's own naming agentrun/bwrap.json: %v\n%s", err, out)
		}
	})
	t.Run("a Pod the namespace refuses", func(t *testing.T) {
		t.Parallel()
		const name = "unconfined"
		m := claudeRun(name, "parallel", port).manifest() + "  podOverrides:\n    seccompProfile: {type: Unconfined}\n"
		applyIn(t, "e2e-baseline", m)
		var run v1alpha1.AgentRun
		var stalled string
		if !eventually(90*time.Second, func() bool {
			getJSON(t, &run, "-n", "e2e-baseline", "get", "agentrun", name)
			stalled = ""
			if c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionStalled); c != nil {
				stalled = c.Reason + "/" + string(c.Status) + ": " + c.Message
			}
			return strings.HasPrefix(stalled, "PodRejected/True")
		}) {
			t.Fatalf("Stalled %q, phase %s: want PodRejected while the Job cannot create the Pod", stalled, run.Status.Phase)
		}
		if run.Status.Phase != v1alpha1.PhasePending || !strings.Contains(stalled, `violates PodSecurity "baseline`) {
			t.Errorf("phase %s, Stalled %q: want Pending with the API server's refusal", run.Status.Phase, stalled)
		}
		reasons, _ := kube("-n", "e2e-baseline", "get", "events", "--field-selector", "involvedObject.uid="+string(run.UID), "-o", "jsonpath={.items[*].reason}")
		if !strings.Contains(reasons, "PodRejected") {
			t.Errorf("Events of the run: %q, want a PodRejected warning", reasons)
		}
		if _, err := kube("-n", "e2e-baseline", "patch", "agentrun", name, "--type", "merge", "-p", `{"spec":{"stop":"Graceful"}}`); err != nil {
			t.Fatal(err)
		}
		ended := waitEndedIn(t, "e2e-baseline", name, time.Minute)
		if got := succeeded(ended); got != "Cancelled/False" {
			t.Errorf("cancelled rejected run: %s", got)
		}
	})
	t.Run("a node without the profile", func(t *testing.T) {
		t.Parallel()
		// The chart's DaemonSet keeps agentrun/bwrap.json on the node
		// (and would put it back), so the run names a profile no node has.
		const name = "no-profile"
		m := claudeRun(name, "parallel", port).manifest() +
			"  podOverrides:\n    seccompProfile: {type: Localhost, localhostProfile: agentrun/missing.json}\n"
		applyIn(t, "default", m)
		run := waitEndedIn(t, "default", name, 3*time.Minute)
		if got := succeeded(run); got != "SandboxUnavailable/False" || !strings.Contains(run.Status.Detail, "seccomp") ||
			!strings.Contains(run.Status.Detail, "sandboxProfiles") {
			t.Errorf("%s: %q; want SandboxUnavailable naming the profile and the fix", got, run.Status.Detail)
		}
		if run.Status.Isolation != nil {
			t.Errorf("status.isolation %+v for an agent that never ran", run.Status.Isolation)
		}
	})
}

func makeNamespace(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	if _, err := kube("delete", "namespace", ns, "--ignore-not-found", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns, "labels": labels}}
	b, _ := json.Marshal(obj)
	if _, err := kubeIn(strings.NewReader(string(b)), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	secret := `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "e2e-keys"}, "stringData": {"key": "` + e2eKey + `"}}`
	if _, err := kubeIn(strings.NewReader(secret), "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kube("delete", "namespace", ns, "--ignore-not-found", "--wait=false"); err != nil {
			t.Error(err)
		}
	})
}

func applyIn(t *testing.T, ns, manifest string) {
	t.Helper()
	if out, err := kubeIn(strings.NewReader(manifest), "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func getJSON(t *testing.T, into any, args ...string) {
	t.Helper()
	out, err := kube(append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), into); err != nil {
		t.Fatal(err)
	}
}

func waitEndedIn(t *testing.T, ns, name string, timeout time.Duration) *v1alpha1.AgentRun {
	t.Helper()
	var run v1alpha1.AgentRun
	if !eventually(timeout, func() bool {
		getJSON(t, &run, "-n", ns, "get", "agentrun", name)
		return run.Status.Phase == v1alpha1.PhaseSucceeded || run.Status.Phase == v1alpha1.PhaseFailed
	}) {
		y, _ := kube("-n", ns, "get", "agentrun", name, "-o", "yaml")
		t.Fatalf("agentrun %s/%s has not ended after %s\n%s", ns, name, timeout, y)
	}
	return &run
}
