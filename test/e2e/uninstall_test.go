//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentrun-dev/agentrun/harvest"
)

// TestUninstallMidRun: `helm uninstall` while an agent works leaves no Pod
// waiting for a manager that is gone. The chart's pre-delete hook removes
// the harvest finalizer from the running agent's Pod (the agent goes on),
// and deleting the run's namespace afterwards completes: the AgentRun, its
// Job and the Pod all go. The chart is installed again for the tests that
// follow. Not parallel: no other run may lose its manager.
func TestUninstallMidRun(t *testing.T) {
	const ns, name = "e2e-uninstall", "e2e-uninstall"
	makeNamespace(t, ns, nil)
	applyIn(t, ns, claudeRun(name, "slow", slowMock(t)).manifest())
	reinstalled := false
	t.Cleanup(func() {
		if !reinstalled {
			reinstall(t)
		}
	})

	var pod corev1.Pod
	working := eventually(2*time.Minute, func() bool {
		podName, err := kube("-n", ns, "get", "agentrun", name, "-o", "jsonpath={.status.podName}")
		if err != nil || strings.TrimSpace(podName) == "" {
			return false
		}
		logs, err := kube("-n", ns, "logs", strings.TrimSpace(podName), "-c", "events")
		if err != nil || !strings.Contains(logs, `"type":"prompt"`) {
			return false
		}
		out, err := kube("-n", ns, "get", "pod", strings.TrimSpace(podName), "-o", "json")
		return err == nil && json.Unmarshal([]byte(out), &pod) == nil
	})
	if !working {
		y, _ := kube("-n", ns, "get", "agentrun,job,pod", "-o", "yaml")
		t.Fatalf("the run did not start working:\n%s", y)
	}
	if !slices.Contains(pod.Finalizers, harvest.Finalizer) {
		t.Fatalf("the working agent's Pod has finalizers %v, want %s", pod.Finalizers, harvest.Finalizer)
	}

	helm, err := script(nil, "hack/k8s-tool.sh", "helm")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(strings.TrimSpace(helm), "uninstall", "agentrun", "--namespace", "agentrun-system", "--kubeconfig", kubeconfig,
		"--wait", "--timeout", "3m").CombinedOutput(); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if out, _ := kube("-n", "agentrun-system", "get", "deployment", "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("the manager is still there after the uninstall: %s", out)
	}

	// The agent still works; its Pod no longer waits for a manager.
	out, err := kube("-n", ns, "get", "pod", pod.Name, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var after corev1.Pod
	if err := json.Unmarshal([]byte(out), &after); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(after.Finalizers, harvest.Finalizer) {
		t.Errorf("after the uninstall the Pod keeps %v: the pre-delete hook did not release it", after.Finalizers)
	}
	if after.DeletionTimestamp != nil || after.Status.Phase != corev1.PodRunning {
		t.Errorf("the uninstall stopped the agent: phase %s, deleting %v", after.Status.Phase, after.DeletionTimestamp)
	}

	deleted := time.Now()
	if _, err := kube("delete", "namespace", ns, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	if !eventually(3*time.Minute, func() bool {
		out, _ := kube("get", "namespace", ns, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == ""
	}) {
		left, _ := kube("-n", ns, "get", "agentrun,job,pod", "-o", "yaml")
		t.Fatalf("the namespace is still there %s after its deletion:\n%s", time.Since(deleted).Round(time.Second), left)
	}
	t.Logf("namespace %s gone %s after its deletion, with no manager installed", ns, time.Since(deleted).Round(100*time.Millisecond))
	reinstalled = true
	reinstall(t)
}

// reinstall installs the chart again as TestMain did.
func reinstall(t *testing.T) {
	t.Helper()
	if _, err := script([]string{"KUBECONFIG=" + kubeconfig, "HELM_VALUES=" + helmValues}, "hack/cluster-install.sh"); err != nil {
		t.Fatalf("installing the chart again: %v", err)
	}
}
