package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy"
)

// TestModelWatchNote: the note names what was seen instead of a model
// request (the proxy's refusals, the last one named; no connection at
// all), and none is written once a connection went through or the output
// shows a model call.
func TestModelWatchNote(t *testing.T) {
	local := []localURL{{name: "ANTHROPIC_BASE_URL", host: "127.0.0.1", port: 8099}}
	var w modelWatch
	w.access(proxy.Access{Host: "127.0.0.1", Port: 8099, Reason: "private_address"})
	w.access(proxy.Access{Host: "::1", Port: 8099, Reason: "not_allowed", Suppressed: 3})
	n := w.note("claude-code", true, local, 0)
	for _, want := range []string{"no model request in 30 s: claude-code reported no model call", "it refused 4, the last to [::1]:8099 (not_allowed", "ANTHROPIC_BASE_URL points at 127.0.0.1:8099 on the loopback", "The run goes on (no --timeout)"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
	var quiet modelWatch
	if n := quiet.note("codex", true, nil, 5*time.Minute); !strings.Contains(n, "asked the proxy for no connection") || !strings.HasSuffix(n, "until --timeout 5m0s") {
		t.Errorf("note %q", n)
	}
	if n := quiet.note("pi", false, nil, 0); !strings.Contains(n, "pi reported no model call yet. A slow model may still answer") {
		t.Errorf("note without the proxy %q", n)
	}
	quiet.output(progress{})
	if quiet.note("pi", false, nil, 0) == "" {
		t.Error("an output without a model call counted")
	}
	quiet.output(progress{modelSeen: true})
	if n := quiet.note("pi", false, nil, 0); n != "" {
		t.Errorf("a model call seen, still a note %q", n)
	}
	w.access(proxy.Access{Host: "api.example.com", Port: 443, Allowed: true})
	if n := w.note("claude-code", true, local, 0); n != "" {
		t.Errorf("a connection let through, still a note %q", n)
	}
}
