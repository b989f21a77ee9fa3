//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// probeTargets are what a compromised agent in a Pod would reach for: the
// API server and the kubelet on the node (the very address the run may use
// for its model, on other ports), cloud metadata, and the API server's
// Service name.
var probeTargets = []struct{ url, hostPort string }{
	{"https://" + nodeIP + ":16443/version", nodeIP + ":16443"},
	{"https://" + nodeIP + ":10250/pods", nodeIP + ":10250"},
	{"http://169.254.169.254/latest/meta-data/", "169.254.169.254:80"},
	{"https://kubernetes.default.svc/version", "kubernetes.default.svc:443"},
}

// TestSandboxInPod: the attacks of test/sandbox, from inside a real agent
// Pod, made by the real claude-code's Bash tool (the mock's probe scenario
// runs a command and answers with its output). Through the filter proxy
// every target is refused and shows as a denied network event; around the
// proxy nothing connects; the agent sees none of the container's own
// environment, cannot read the runner's through /proc, has no service
// account token and does not run as root.
func TestSandboxInPod(t *testing.T) {
	t.Parallel()
	_, port := startMock(t, mockmodel.Options{})
	var script strings.Builder
	for _, p := range probeTargets {
		fmt.Fprintf(&script, "echo \"proxy %[1]s $(curl -sk -m 5 -o /dev/null -w '%%{http_code}/%%{http_connect}' %[1]s)\"\n", p.url)
		fmt.Fprintf(&script, "echo \"direct %[1]s $(curl -sk -m 5 --noproxy '*' -o /dev/null -w '%%{http_code}' %[1]s)\"\n", p.url)
	}
	script.WriteString(`echo "env $(env | grep -c '^KUBERNETES_')"
echo "environ $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c '^KUBERNETES_SERVICE_HOST=')"
echo "token $(cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null | wc -c)"
echo "uid $(id -u)"
`)
	const name = "e2e-sandbox"
	r := claudeRun(name, "probe", port)
	r.prompt = "Please check the sandbox. scenario:probe probe<<<\n" + script.String() + ">>>"
	r.apply(t)
	run := waitEnded(t, name, 3*time.Minute)
	st := run.Status
	if st.Phase != "Succeeded" || st.Result == nil || !strings.HasPrefix(*st.Result, mockmodel.ProbeAnswerPrefix) {
		t.Fatalf("phase %s result %v detail %q", st.Phase, st.Result, st.Detail)
	}
	t.Logf("what the agent saw:\n%s", strings.TrimPrefix(*st.Result, mockmodel.ProbeAnswerPrefix))
	seen := map[string]string{}
	for _, line := range strings.Split(*st.Result, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			seen[strings.Join(f[:len(f)-1], " ")] = f[len(f)-1]
		}
	}
	for _, p := range probeTargets {
		// A refused CONNECT has code 000 and connect code 403; a refused
		// plain request the proxy's own 403.
		if got := seen["proxy "+p.url]; got != "000/403" && got != "403/000" {
			t.Errorf("through the proxy %s gave %q, want the proxy's 403", p.url, got)
		}
		if got := seen["direct "+p.url]; got != "000" {
			t.Errorf("around the proxy %s gave %q, want no connection (000)", p.url, got)
		}
	}
	for key, want := range map[string]string{"env": "0", "environ": "0", "token": "0"} {
		if got := seen[key]; got != want {
			t.Errorf("%s: %q, want %s", key, got, want)
		}
	}
	if got := seen["uid"]; got == "" || got == "0" {
		t.Errorf("the agent runs as uid %q", got)
	}

	stream, _ := eventLog(t, st.PodName)
	denied := map[string]bool{}
	for _, e := range stream {
		n, ok := e.(*events.NetworkAccess)
		if !ok {
			continue
		}
		hp := fmt.Sprintf("%s:%d", n.Host, n.Port)
		if n.Allowed && hp != fmt.Sprintf("%s:%d", mockHost, port) {
			t.Errorf("allowed connection to %s", hp)
		}
		if !n.Allowed {
			denied[hp] = true
		}
	}
	for _, p := range probeTargets {
		if !denied[p.hostPort] {
			t.Errorf("no denied network event for %s (denied: %v)", p.hostPort, denied)
		}
	}
	if st.Counters == nil || int(st.Counters.DeniedConnections) < len(probeTargets) {
		t.Errorf("status counters %+v, want at least %d denied connections", st.Counters, len(probeTargets))
	}
}
