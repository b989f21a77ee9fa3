package cli

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

// TestCredentialPlainHTTPNeedsOptIn: the real key leaves the runner only
// over verified TLS, unless the credential's destination is declared as
// plain HTTP (http://HOST:PORT). An agent that speaks plain HTTP to a
// credential destination (absolute-form through the proxy, or inside a
// CONNECT tunnel, whatever the port) is refused with 403 and the reason
// tls_required, and the upstream never sees the key; declared with
// http://, the same requests carry it.
func TestCredentialPlainHTTPNeedsOptIn(t *testing.T) {
	const real = "sk-real-plain-http-0123456789"
	var seen lockedBuffer
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(&seen, "%s %v\n", r.URL.Path, r.Header)
		fmt.Fprintln(w, "upstream ok")
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	target := "http://api.test:" + port
	script := fmt.Sprintf(`{
echo "== absolute-form"; curl -s -i -x http://127.0.0.1:3128 -H "x-api-key: $KEY" %[1]s/absolute
echo "== tunnel"; curl -s -i -p -x http://127.0.0.1:3128 -H "x-api-key: $KEY" %[1]s/tunnel
} >&2`, target)
	bin := fakeCLI(t, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":1,"output_tokens":1}}`+"\n"), script)
	for _, tt := range []struct {
		name, dest string
		optIn      bool
	}{
		{"no opt-in", "api.test:" + port, false},
		{"http opt-in", "http://api.test:" + port, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			seen = lockedBuffer{}
			r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(), "--credential", "KEY=" + tt.dest,
				"--add-host", "api.test=127.0.0.1", "--allow-host", "127.0.0.1:" + port}, prompt: "hi",
				env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=" + real}})
			if end := r.end(); end == nil || end.Status != events.StatusFinished {
				t.Fatalf("end %+v\nstderr %s", end, r.stderr)
			}
			out, got := string(r.stderr), seen.String()
			if strings.Contains(out, real) {
				t.Errorf("the real key reached the agent")
			}
			if tt.optIn {
				if strings.Count(got, real) != 2 || strings.Count(out, "upstream ok") != 2 {
					t.Errorf("declared plain HTTP: the upstream saw %q; the agent %s", got, out)
				}
				return
			}
			if got != "" {
				t.Errorf("a request went upstream over plain HTTP: %s", got)
			}
			if strings.Count(out, "403") < 2 || strings.Count(out, "tls_required") < 2 {
				t.Errorf("plain HTTP to a credential destination was not refused with tls_required: %s", out)
			}
			refused := false
			for _, e := range r.events {
				if a, ok := e.(*events.NetworkAccess); ok && !a.Allowed && *a.Reason == "tls_required" && a.Host == "api.test" {
					refused = true
				}
			}
			if !refused {
				t.Errorf("no network event with reason tls_required")
			}
		})
	}
}
