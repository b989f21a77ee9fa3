//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestOperatorInstalledByChart: the manager runs in the cluster as the
// Helm chart deployed it: a ready Pod on the Pod network under the chart's
// restricted securityContext, holding the leader lease, serving the
// controller's metrics over HTTPS to authorized callers only. (Not
// parallel: it runs before the runs start.)
func TestOperatorInstalledByChart(t *testing.T) {
	out, err := kube("-n", "agentrun-system", "get", "pods", "-l", "app.kubernetes.io/component=manager", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := json.Unmarshal([]byte(out), &pods); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			pod = &pods.Items[i]
		}
	}
	if pod == nil {
		t.Fatalf("no manager Pod in agentrun-system")
	}
	if pod.Labels["app.kubernetes.io/instance"] != "agentrun" {
		t.Errorf("manager Pod labels %v: not the chart's release", pod.Labels)
	}
	ready := false
	for _, c := range pod.Status.Conditions {
		ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}
	if !ready || pod.Spec.HostNetwork || !strings.HasPrefix(pod.Status.PodIP, "10.201.") {
		t.Errorf("manager Pod ready %v hostNetwork %v IP %s: want a ready Pod on the Pod network", ready, pod.Spec.HostNetwork, pod.Status.PodIP)
	}
	psc, sc := pod.Spec.SecurityContext, pod.Spec.Containers[0].SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || sc == nil ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("manager securityContext pod %+v container %+v: want the chart's restricted one", psc, sc)
	}

	// The lease names the manager Pod once it leads.
	var holder string
	eventually(time.Minute, func() bool {
		out, err := kube("-n", "agentrun-system", "get", "leases", "-o", "jsonpath={.items[*].spec.holderIdentity}")
		holder = out
		return err == nil && strings.Contains(out, pod.Name)
	})
	if !strings.Contains(holder, pod.Name) {
		t.Errorf("lease holders %q, want the manager Pod %s", holder, pod.Name)
	}

	// The host reaches the Pod network through the CNI bridge. The metrics
	// are HTTPS (a self-signed certificate) for callers the API server
	// authenticates and allows get on /metrics: a token of a ServiceAccount
	// bound to the chart's metrics-reader ClusterRole, not an anonymous
	// request.
	scraper := `{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "e2e-scraper", "namespace": "agentrun-system"}}`
	binding := `{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "e2e-scraper"},
		"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "agentrun-manager-metrics-reader"},
		"subjects": [{"kind": "ServiceAccount", "name": "e2e-scraper", "namespace": "agentrun-system"}]}`
	for _, obj := range []string{scraper, binding} {
		if _, err := kubeIn(strings.NewReader(obj), "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	token, err := kube("-n", "agentrun-system", "create", "token", "e2e-scraper", "--duration", "10m")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://"+pod.Status.PodIP+":8443/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %d %.200s, want 401", code, body)
	}
	// The binding reaches the API server's authorizer within moments, but
	// a refusal before that stays in the manager's cache of denials for
	// 30 s: hence the minute.
	var code int
	var body string
	eventually(time.Minute, func() bool {
		code, body = get(strings.TrimSpace(token))
		return code == http.StatusOK
	})
	if code != http.StatusOK || !strings.Contains(body, `controller_runtime_active_workers{controller="agentrun"}`) {
		t.Errorf("metrics with the scraper's token: %d\n%.500s", code, body)
	}
}
