package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/credentials"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/mockmodel"
)

// credRuntime is how one CLI is pointed at the mock with a credential.
type credRuntime struct {
	name, model, binEnv string
	bin                 func(*testing.T) string
	keyVar, baseVar     string
	basePath            string // after host:port
	extra               []string
}

var credRuntimes = []credRuntime{
	{"claude-code", "sonnet", "AGENTRUN_CLAUDE_BIN", claudeBin, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "",
		[]string{"--env", "CLAUDE_CODE_MAX_RETRIES=1"}},
	{"codex", codexModel, "AGENTRUN_CODEX_BIN", codexBin, "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1",
		[]string{"--env", "AGENTRUN_MODEL_RETRIES=1"}},
	{"pi", piModel, "AGENTRUN_PI_BIN", piBin, "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1",
		[]string{"--env", "AGENTRUN_MODEL_RETRIES=1"}},
}

// lockedBuffer is a request log written by the mock's handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCredentialsNeverReachTheAgent runs each real CLI in the sandbox with
// --credential against the mock, which answers only calls that carry the
// real key, over plain HTTP and over HTTPS (a TLS front with its own CA,
// which the proxy verifies with --upstream-ca). The agent's Bash tool
// prints its environment and every /proc/*/environ, and sends the key it
// holds to another allowed host. The real key must reach the mock on every
// call and appear nowhere else: not in the agent's output, the events, the
// raw output, stderr, the mock's request bodies or the other host's
// headers. The proxy's meter counts what the mock served.
func TestCredentialsNeverReachTheAgent(t *testing.T) {
	for _, rt := range credRuntimes {
		for _, scheme := range []string{"http", "https"} {
			t.Run(rt.name+" "+scheme, func(t *testing.T) {
				var rnd [12]byte
				_, _ = rand.Read(rnd[:])
				real := "sk-real-" + hex.EncodeToString(rnd[:])
				var reqLog lockedBuffer
				srv, err := mockmodel.Start(mockmodel.Options{APIKey: real, RequestLog: &reqLog})
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				// Another allowed host, which records what it is sent.
				var echoed lockedBuffer
				echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					fmt.Fprintf(&echoed, "%v\n", r.Header)
					fmt.Fprintln(w, "echo ok")
				}))
				defer echo.Close()
				_, echoPort, _ := net.SplitHostPort(echo.Listener.Addr().String())

				ws := t.TempDir()
				u, _ := url.Parse(srv.URL())
				port := u.Port()
				var args []string
				if scheme == "https" {
					caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
					_, port, _ = net.SplitHostPort(tlsFront(t, srv.URL(), mockHost, caFile))
					args = append(args, "--upstream-ca", caFile)
				}
				args = append(args, "--runtime", rt.name, "--model", rt.model, "--cwd", ws,
					"--credential", rt.keyVar+"="+mockHost+":"+port,
					"--env", rt.baseVar+"="+scheme+"://"+mockHost+":"+port+rt.basePath,
					"--add-host", mockHost+"=127.0.0.1", "--allow-host", "127.0.0.1:"+port,
					"--add-host", "echo.test=127.0.0.1", "--allow-host", "echo.test:"+echoPort, "--allow-host", "127.0.0.1:"+echoPort)
				args = append(args, rt.extra...)
				probe := fmt.Sprintf(`env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'; `+
					`curl -s -H "x-api-key: $%[1]s" -H "Authorization: Bearer $%[1]s" http://echo.test:%[2]s/; echo PROBE-DONE`, rt.keyVar, echoPort)
				r := runAgentrun(t, invocation{args: args, prompt: "scenario:probe probe<<<" + probe + ">>>",
					env: []string{rt.binEnv + "=" + rt.bin(t), rt.keyVar + "=" + real}, timeout: 2 * time.Minute})

				end := r.end()
				if end == nil || end.Status != events.StatusFinished || end.Result == nil || !strings.Contains(*end.Result, "PROBE-DONE") {
					t.Fatalf("end %+v\nstderr %s", end, r.stderr)
				}
				if !strings.Contains(*end.Result, rt.keyVar+"="+credentials.StandInPrefix) || !strings.Contains(*end.Result, "echo ok") {
					t.Errorf("the agent did not see its stand-in, or could not reach the other host: %s", *end.Result)
				}
				ledger := srv.Ledger()
				served := 0
				for _, c := range ledger {
					if c.Key != "ok" {
						t.Errorf("a call reached the mock without the real key: %+v", c)
					}
					if c.Status == 200 {
						served++
					}
				}
				if served < 2 {
					t.Errorf("the mock served %d calls, want the probe's two: %+v", served, ledger)
				}
				if !strings.Contains(echoed.String(), credentials.StandInPrefix) {
					t.Errorf("the other host did not get the stand-in: %s", echoed.String())
				}
				for name, text := range map[string]string{"events": string(r.stdout), "stderr": string(r.stderr), "raw output": string(r.raw),
					"the mock's requests": reqLog.String(), "the other host": echoed.String()} {
					if strings.Contains(text, real) {
						t.Errorf("the real key appears in %s", name)
					}
				}
				start := r.events[0].(*events.Start)
				if len(start.Credentials) != 1 || start.Credentials[0] != rt.keyVar {
					t.Errorf("start.credentials = %v", start.Credentials)
				}
				checkMeter(t, end, ledger)
			})
		}
	}
}

// checkMeter: end.meter counts every call the mock answered, with the
// mock's own numbers, and agrees with end.usage.
func checkMeter(t *testing.T, end *events.End, ledger []mockmodel.Call) {
	t.Helper()
	var want events.Meter
	for _, c := range ledger {
		if c.Status != 200 {
			continue
		}
		want.Calls++
		want.InputTokens += c.Usage.InputTokens
		want.OutputTokens += c.Usage.OutputTokens
		want.CacheReadTokens += c.Usage.CacheReadTokens
		want.CacheWriteTokens += c.Usage.CacheWriteTokens
	}
	want.Matches = true
	if end.Meter == nil || *end.Meter != want {
		t.Errorf("end.meter %+v, want %+v (end.usage %s)", end.Meter, want, show(end.Usage))
	}
}
