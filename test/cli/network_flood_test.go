package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/proxy"
)

// TestNetworkFloodIsSummarised: an agent that asks the proxy for
// thousands of distinct refused destinations (a scan, or a flood meant to
// grow the runner's memory and the event stream) gets one network event
// each only up to the proxy's cap; the rest arrive as summaries whose
// suppressed counts add up to every refusal.
func TestNetworkFloodIsSummarised(t *testing.T) {
	const n = proxy.MaxReported + 2000
	script := fmt.Sprintf(`bash -c 'for i in $(seq 1 %d); do
  exec 3<>/dev/tcp/127.0.0.1/3128
  printf "CONNECT h$i.flood.example.org:443 HTTP/1.1\r\nHost: x\r\n\r\n" >&3
  read -r line <&3
  exec 3<&- 3>&-
done; echo flood-done' >&2`, n)
	bin := fakeCLI(t, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":1,"output_tokens":1}}`+"\n"), script)
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(), "--allow-host", "example.com"},
		prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin}, timeout: 3 * time.Minute})
	if end := r.end(); end == nil || end.Status != events.StatusFinished || !strings.Contains(string(r.stderr), "flood-done") {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	refused, total, summaries := 0, 0, 0
	for _, e := range r.events {
		if a, ok := e.(*events.NetworkAccess); ok && !a.Allowed {
			refused++
			total += max(1, a.Suppressed)
			if a.Suppressed > 0 {
				summaries++
			}
		}
	}
	if refused > proxy.MaxReported+10 || summaries == 0 {
		t.Errorf("%d refused network events (%d summaries) for %d refusals: the stream grows with the flood", refused, summaries, n)
	}
	if total != n {
		t.Errorf("the events stand for %d refusals, want %d", total, n)
	}
}
