package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
)

// TestCredentialEchoAttack: a credential destination that echoes a
// request's headers (a debugging endpoint, an error that quotes them) must
// not hand the real key to the agent in any form the proxy made: not the
// Authorization: Basic value it encoded again with the key inside, not
// pieces of an echo fetched by byte range (none of them the whole key),
// and a stand-in the agent put into a header that is not for
// authentication stays the stand-in upstream.
func TestCredentialEchoAttack(t *testing.T) {
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	secret := hex.EncodeToString(rnd[:])
	real := "sk-echo-" + secret
	var seen lockedBuffer
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lines []string
		for k, v := range r.Header {
			lines = append(lines, k+": "+strings.Join(v, ", "))
			fmt.Fprintf(&seen, "%s: %s\n", k, strings.Join(v, ", "))
		}
		sort.Strings(lines)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		// ServeContent answers Range and If-Range as any file server does.
		http.ServeContent(w, r, "echo", time.Time{}, bytes.NewReader([]byte(strings.Join(lines, "\n")+"\n")))
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	u := "http://api.test:" + port + "/echo"
	script := fmt.Sprintf(`{
echo "== basic"
for user in u uu uuu; do
  B=$(printf '%%s:%%s' "$user" "$KEY" | base64 -w0)
  curl -s -D - -H "Authorization: Basic $B" %[1]s
done
echo "== range"
r() { curl -s -H "x-api-key: $KEY" -H "Range: bytes=$1-$2" %[1]s; }
OFF=$(r 0 9999 | grep -boi 'x-api-key: ' | cut -d: -f1); OFF=$((OFF+11))
for i in 0 1 2 3 4 5 6 7; do r $((OFF+i*5)) $((OFF+i*5+4)); echo; done
echo "== other"
curl -s -H "X-Other: $KEY" -H "Cookie: k=$KEY" %[1]s
} >&2`, u)
	bin := fakeCLI(t, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":1,"output_tokens":1}}`+"\n"), script)
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(), "--credential", "KEY=http://api.test:" + port,
		"--add-host", "api.test=127.0.0.1", "--allow-host", "127.0.0.1:" + port}, prompt: "hi",
		env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=" + real}})
	if end := r.end(); end == nil || end.Status != events.StatusFinished {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	out, got := string(r.stderr), seen.String()
	if !strings.Contains(out, "== other") {
		t.Fatalf("the agent's script did not run: %s", out)
	}
	// Any 8 characters of the key's random part, in any encoding the proxy
	// made, is a piece of it.
	for _, user := range []string{"u", "uu", "uuu"} {
		enc := strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(user+":"+real)), "=")
		if strings.Contains(out, enc[len(enc)-12:]) {
			t.Errorf("the Basic value with the key inside came back (user %q): %s", user, out)
		}
	}
	// The range pieces, one a line, joined again.
	_, pieces, _ := strings.Cut(out, "== range")
	pieces, _, _ = strings.Cut(pieces, "== other")
	joined := strings.ReplaceAll(pieces, "\n", "")
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+8]) || strings.Contains(joined, secret[i:i+8]) {
			t.Errorf("pieces of the key reached the agent (%s): %s", secret[i:i+8], pieces)
			break
		}
	}
	if strings.Contains(got, "Range") {
		t.Errorf("the upstream was asked for a byte range: %s", got)
	}
	if !strings.Contains(got, "X-Other: "+credentials.StandInPrefix) || !strings.Contains(got, "Cookie: k="+credentials.StandInPrefix) ||
		!strings.Contains(got, "X-Api-Key: "+real) {
		t.Errorf("the key belongs in the authentication headers only; the upstream saw: %s", got)
	}
}
