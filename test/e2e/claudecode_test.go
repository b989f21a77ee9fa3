//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// parallelResult is the result of the mock's parallel scenario.
const parallelResult = "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"

// claudeRun is a claude-code AgentRun of a mock scenario.
func claudeRun(name, scenario string, port int) agentRun {
	return agentRun{name: name, runtime: "claude-code", model: "sonnet", timeout: "5m", port: port,
		prompt: "Please run the demo. scenario:" + scenario, keyEnv: "ANTHROPIC_API_KEY",
		env: map[string]string{
			"ANTHROPIC_BASE_URL":      "http://" + mockHost + ":" + strconv.Itoa(port),
			"CLAUDE_CODE_MAX_RETRIES": "1",
		}}
}

// TestClaudeCodeAgentRun: apply → Job → Pod → the real claude-code in
// bubblewrap against the mock model through agentrun's filter proxy → the
// AgentRun's status with the mock's token counts, the CLI's cost and the
// result, Succeeded; the events sidecar's log is the schema-1 stream. The
// Pod runs under the securityContext the operator installed by the chart
// gives it: not privileged, non-root, no capabilities, no privilege
// escalation, and the sandbox works there.
func TestClaudeCodeAgentRun(t *testing.T) {
	t.Parallel()
	srv, port := startMock(t, mockmodel.Options{})
	const name = "e2e-claude-code"
	applied := claudeRun(name, "parallel", port).apply(t)
	run := waitEnded(t, name, 3*time.Minute)
	t.Logf("%s %s after apply", run.Status.Phase, time.Since(applied).Round(100*time.Millisecond))

	st := run.Status
	if st.Phase != "Succeeded" || st.EndStatus != "finished" || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Errorf("phase %s endStatus %s exitCode %v detail %q", st.Phase, st.EndStatus, st.ExitCode, st.Detail)
	}
	wantResult := parallelResult
	if st.Result == nil || *st.Result != wantResult {
		t.Errorf("result %v, want %q", st.Result, wantResult)
	}
	if st.JobName == "" || st.PodName == "" {
		t.Fatalf("jobName %q podName %q", st.JobName, st.PodName)
	}
	if _, err := kube("get", "job", st.JobName); err != nil {
		t.Error(err)
	}

	stream, end := eventLog(t, st.PodName)
	for _, err := range mockmodel.VerifyUsage(stream, srv.Ledger(), false) {
		t.Error(err)
	}
	// The status carries the stream's totals (which VerifyUsage tied to
	// the mock's ledger): the mock's token counts and the CLI's own cost.
	u := st.Usage
	if u == nil || u.InputTokens == nil || u.OutputTokens == nil {
		t.Fatalf("status.usage %+v", u)
	}
	if end.Usage.InputTokens == nil || end.Usage.OutputTokens == nil || *u.InputTokens == 0 ||
		*end.Usage.InputTokens != *u.InputTokens || *end.Usage.OutputTokens != *u.OutputTokens {
		t.Errorf("status tokens in %d out %d, end %v %v", *u.InputTokens, *u.OutputTokens, end.Usage.InputTokens, end.Usage.OutputTokens)
	}
	// Two complete calls of the main agent. claude-code may add a side
	// call (a title, a classifier) or retry a stream that stalled under
	// load; the stream accounts for those too (VerifyUsage above).
	var main int
	for _, c := range srv.Ledger() {
		if c.Role == "main" && !c.Aborted {
			main++
		} else {
			t.Logf("an extra call: %+v", c)
		}
	}
	if main != 2 {
		t.Errorf("the mock served %d complete calls of the main agent, want 2: %+v", main, srv.Ledger())
	}
	cost, err := strconv.ParseFloat(u.CostUSD, 64)
	if err != nil || end.Usage.CostUSD == nil || cost != *end.Usage.CostUSD || cost <= 0 {
		t.Errorf("status cost %q, the CLI's cost in end %v", u.CostUSD, end.Usage.CostUSD)
	}
	if end.Result == nil || *end.Result != wantResult {
		t.Errorf("end result %v", end.Result)
	}
	if st.Counters == nil || st.Counters.Tools != 2 || st.Counters.DeniedConnections != 0 {
		t.Errorf("counters %+v, want 2 tools and no denied connection", st.Counters)
	}

	// The manager, with the chart's RBAC, told the story in Events too.
	var reasons string
	if !eventually(30*time.Second, func() bool {
		reasons, _ = kube("get", "events", "--field-selector", "involvedObject.uid="+string(run.UID),
			"-o", "jsonpath={.items[*].reason}")
		return strings.Contains(reasons, "Started") && strings.Contains(reasons, "Finished")
	}) {
		t.Errorf("Events of the run: %q, want Started and Finished", reasons)
	}

	// The sandbox ran, and under what securityContext.
	start, ok := stream[0].(*events.Start)
	if !ok || start.Sandbox != "bubblewrap" || start.Network.Mode != "custom" || !start.Network.Enforced {
		t.Errorf("start %+v: want the bubblewrap sandbox with the custom network", stream[0])
	}
	checkAgentSecurity(t, getPod(t, st.PodName))
}

// checkAgentSecurity: the agent container runs bubblewrap without
// privilege: non-root, no capabilities, no escalation, agentrun's
// Localhost seccomp profile (the chart's DaemonSet put it on the node; it
// allows bubblewrap's namespaces and mounts and nothing more), no API token.
func checkAgentSecurity(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		t.Error("the agent Pod shares a host namespace")
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the agent Pod mounts a service account token")
	}
	var agent *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "agent" {
			agent = &pod.Spec.Containers[i]
		}
	}
	if agent == nil || agent.SecurityContext == nil {
		t.Fatalf("no agent container with a securityContext: %+v", pod.Spec.Containers)
	}
	sc := agent.SecurityContext
	switch {
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("the agent container is privileged")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("the agent container may run as root")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("the agent container allows privilege escalation")
	case sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("the agent container's capabilities %+v, want all dropped", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost ||
		sc.SeccompProfile.LocalhostProfile == nil || *sc.SeccompProfile.LocalhostProfile != "agentrun/bwrap.json":
		t.Errorf("seccomp %+v, want Localhost agentrun/bwrap.json", sc.SeccompProfile)
	case sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeUnconfined:
		t.Error("AppArmor Unconfined")
	}
}

// TestDeniedHost: the agent's command reaches for a host that is not on
// the run's list; the filter proxy in the Pod refuses it, the event stream
// has the refused connection and the status counts it.
func TestDeniedHost(t *testing.T) {
	t.Parallel()
	_, port := startMock(t, mockmodel.Options{})
	const name = "e2e-denied-host"
	claudeRun(name, "nethost", port).apply(t)
	run := waitEnded(t, name, 3*time.Minute)
	st := run.Status
	if st.Phase != "Succeeded" || st.Result == nil || *st.Result != "The host was blocked." {
		t.Errorf("phase %s result %v detail %q", st.Phase, st.Result, st.Detail)
	}
	stream, _ := eventLog(t, st.PodName)
	var denied []*events.NetworkAccess
	for _, e := range stream {
		if n, ok := e.(*events.NetworkAccess); ok && !n.Allowed {
			denied = append(denied, n)
		}
	}
	var blocked bool
	for _, n := range denied {
		blocked = blocked || n.Host == "blocked.example" && n.Port == 80 && n.Reason != nil && *n.Reason == events.ReasonNotAllowed
	}
	if !blocked {
		t.Errorf("no not_allowed network event for blocked.example:80 in %+v", denied)
	}
	if st.Counters == nil || int(st.Counters.DeniedConnections) != len(denied) || len(denied) == 0 {
		t.Errorf("status counters %+v, the stream has %d denied connections", st.Counters, len(denied))
	}
	tool := eventstest.Find[*events.Tool](stream)
	if tool == nil || tool.Error == nil || !*tool.Error {
		t.Errorf("the refused curl must show as a failed tool: %+v", tool)
	}
}
