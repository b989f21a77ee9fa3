package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

// TestReviewCredentialGatewayByAddress (review of issue 21): a credential
// gateway on a private address (--add-host api.test=127.0.0.1) needs an
// --allow-host 127.0.0.1:PORT, which the runner asks for; through it the
// agent reached the gateway by its address (in any spelling) past the
// interceptor, and spent tokens past --max-tokens on a call the meter
// cannot count (a Message Batch). Inside the real sandbox, as root and as
// uid 65534: every such call is refused (credential_address) and nothing
// reaches the gateway but what goes by its name.
func TestReviewCredentialGatewayByAddress(t *testing.T) {
	port, seen := meteredUpstream(t)
	const key = "sk-real-review21-0123456789"
	for _, u := range []struct {
		name   string
		uid    int
		prefix []string
	}{
		{"root", 0, nil},
		{"nobody", 65534, []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}},
	} {
		t.Run(u.name, func(t *testing.T) {
			*seen = lockedBuffer{}
			dir, err := os.MkdirTemp("/var/tmp", "agentrun-review21-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "agentrun")
			if b, err := os.ReadFile(agentrun); err != nil || os.WriteFile(bin, b, 0o755) != nil {
				t.Fatalf("copying agentrun: %v", err)
			}
			ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
			for _, d := range []string{ws, home} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Lchown(d, u.uid, u.uid); err != nil {
					t.Fatal(err)
				}
			}
			fake := filepath.Join(dir, "claude")
			script := "#!/bin/sh\ncat >/dev/null\n" +
				"c() { curl -s -o /dev/null -w \"call $1 %{http_code}\\n\" -H \"x-api-key: $KEY\" -X POST -d '{}' \"$1/v1/messages/batches\" >&2; }\n" +
				"for h in 127.0.0.1 '[::ffff:127.0.0.1]' 2130706433 127.1 localhost; do c http://$h:" + port + "; done\n" +
				"curl -s -o /dev/null -w \"models %{http_code}\\n\" -H \"x-api-key: $KEY\" http://api.test:" + port + "/v1/models >&2\n" +
				`echo '{"type":"system","subtype":"init","session_id":"x"}'` + "\n" +
				`echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":1,"output_tokens":1}}'` + "\n"
			if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{}, u.prefix...), bin, "run", "--runtime", "claude-code", "--format", "jsonl", "--cwd", ws,
				"--max-tokens", "1000", "--credential", "KEY=http://api.test:"+port, "--add-host", "api.test=127.0.0.1",
				"--allow-host", "127.0.0.1:"+port, "--allow-host", "localhost:"+port, "hi")
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "AGENTRUN_CLAUDE_BIN=" + fake, "KEY=" + key}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			_ = cmd.Run()
			var refused []string
			var end *events.End
			rd := events.NewReader(bytes.NewReader(stdout.Bytes()))
			for {
				e, err := rd.Next()
				if err != nil {
					break
				}
				switch x := e.(type) {
				case *events.NetworkAccess:
					if x.Reason != nil && *x.Reason == events.ReasonCredentialAddress {
						refused = append(refused, x.Host)
					}
				case *events.End:
					end = x
				}
			}
			if end == nil {
				t.Fatalf("no end\nstdout %s\nstderr %s", stdout.Bytes(), stderr.Bytes())
			}
			got := seen.String()
			if !strings.Contains(got, "GET /v1/models") || !strings.Contains(stderr.String(), "models 200") {
				t.Fatalf("the gateway by its own name was not reached: the test proves nothing\nupstream %s\nstderr %s", got, stderr.Bytes())
			}
			if strings.Contains(got, "batches") {
				t.Errorf("a call the meter cannot count reached the gateway by its address past the interceptor:\n%s\nstderr %s", got, stderr.Bytes())
			}
			if len(refused) < 2 {
				t.Errorf("network events with reason %s: %v, want the address and localhost", events.ReasonCredentialAddress, refused)
			}
			if bytes.Contains(stdout.Bytes(), []byte(key)) || bytes.Contains(stderr.Bytes(), []byte(key)) {
				t.Errorf("the key reached the output")
			}
		})
	}
}
