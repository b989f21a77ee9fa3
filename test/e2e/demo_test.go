//go:build e2e

package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestMakeDemo runs the README's main command on the test's cluster
// (`hack/cluster-demo.sh up` with KUBECONFIG set, as on a cluster of the
// user's choosing): it prints the finished AgentRun with the mock's usage
// and the result. `down` then removes the demo's objects and its mock
// model, and leaves the release it did not install. (Not parallel: it
// runs before the other runs start.)
func TestMakeDemo(t *testing.T) {
	env := []string{"KUBECONFIG=" + kubeconfig}
	out, err := script(env, "hack/cluster-demo.sh", "up")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var run v1alpha1.AgentRun
	if err := yaml.Unmarshal([]byte(out), &run); err != nil {
		t.Fatalf("the demo printed no AgentRun: %v\n%s", err, out)
	}
	st := run.Status
	u := st.Usage
	if st.Phase != v1alpha1.PhaseSucceeded || st.Result == nil || *st.Result != parallelResult || u == nil {
		t.Fatalf("the demo's AgentRun:\n%s", out)
	}
	// The mock's two main calls of the parallel scenario.
	if *u.InputTokens != 21 || *u.OutputTokens != 45 || *u.CacheReadTokens != 1000 || *u.CacheWriteTokens != 300 || u.CostUSD == "" {
		t.Errorf("usage %+v", u)
	}

	if out, err := script(env, "hack/cluster-demo.sh", "down"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, obj := range []string{"agentrun/" + run.Name, "secret/agent-keys"} {
		if out, _ := kube("get", obj, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("%s is still there after demo down", obj)
		}
	}
	if _, err := kube("-n", "agentrun-system", "get", "deployment", "agentrun-manager"); err != nil {
		t.Errorf("demo down removed a release it had not installed: %v", err)
	}
	if c, err := net.DialTimeout("tcp", nodeIP+":18080", time.Second); err == nil {
		c.Close()
		t.Error("the demo's mock model still listens after demo down")
	}
}
