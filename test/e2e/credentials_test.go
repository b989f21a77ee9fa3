//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
)

// TestCredentialAgentRun: an AgentRun whose key is in spec.credentials.
// The mock answers only calls that carry the e2e Secret's key; the agent's
// Bash tool prints its environment and every /proc/*/environ it can read.
// The key reaches the mock on every call, while the agent, the event log
// and the AgentRun's status hold only the stand-in; start names the
// credential and end.meter counts the mock's calls.
func TestCredentialAgentRun(t *testing.T) {
	t.Parallel()
	srv, port := startMock(t, mockmodel.Options{APIKey: e2eKey})
	const name = "e2e-credential"
	run := claudeRun(name, "probe", port)
	run.prompt = "scenario:probe probe<<<env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; echo PROBE-DONE>>>"
	run.credential = true
	run.apply(t)
	st := waitEnded(t, name, 3*time.Minute).Status
	if st.Phase != "Succeeded" || st.Result == nil || !strings.Contains(*st.Result, "PROBE-DONE") {
		t.Fatalf("phase %s result %v detail %q", st.Phase, st.Result, st.Detail)
	}
	if !strings.Contains(*st.Result, "ANTHROPIC_API_KEY="+credentials.StandInPrefix) {
		t.Errorf("the agent did not hold the stand-in: %s", *st.Result)
	}
	for _, c := range srv.Ledger() {
		if c.Key != "ok" {
			t.Errorf("a call reached the mock without the key: %+v", c)
		}
	}
	stream, end := eventLog(t, st.PodName)
	y, _ := kube("get", "agentrun", name, "-o", "yaml")
	logText, _ := kube("logs", st.PodName, "-c", "events")
	for where, text := range map[string]string{"status": y, "event log": logText, "result": *st.Result} {
		if strings.Contains(text, e2eKey) {
			t.Errorf("the real key appears in the %s", where)
		}
	}
	start := stream[0].(*events.Start)
	if len(start.Credentials) != 1 || start.Credentials[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("start.credentials %v", start.Credentials)
	}
	if end.Meter == nil || end.Meter.Calls != len(srv.Ledger()) || !end.Meter.Matches {
		t.Errorf("end.meter %+v, the mock served %d calls", end.Meter, len(srv.Ledger()))
	}
}
