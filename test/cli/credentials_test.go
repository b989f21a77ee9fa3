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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
)

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
// real key, over plain HTTP (the destination declared http://, as it must
// be for the key to travel unencrypted) and over HTTPS (a TLS front with
// its own CA, which the proxy verifies with --upstream-ca). The agent's Bash tool
// prints its environment and every /proc/*/environ, and sends the key it
// holds to another allowed host. The real key must reach the mock on every
// call and appear nowhere else: not in the agent's output, the events, the
// raw output, stderr, the mock's request bodies or the other host's
// headers. The proxy's meter counts what the mock served.
func TestCredentialsNeverReachTheAgent(t *testing.T) {
	for _, rt := range cliRuntimes {
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
				dest := "http://"
				if scheme == "https" {
					caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
					_, port, _ = net.SplitHostPort(tlsFront(t, srv.URL(), mockHost, caFile))
					args = append(args, "--upstream-ca", caFile)
					dest = ""
				}
				args = append(args, "--runtime", rt.name, "--model", rt.model, "--cwd", ws,
					"--credential", rt.keyVar+"="+dest+mockHost+":"+port,
					"--env", rt.baseVar+"="+scheme+"://"+mockHost+":"+port+rt.basePath,
					"--add-host", mockHost+"=127.0.0.1", "--allow-host", "127.0.0.1:"+port,
					"--add-host", "echo.test=127.0.0.1", "--allow-host", "echo.test:"+echoPort, "--allow-host", "127.0.0.1:"+echoPort,
					"--env", rt.retries)
				probe := fmt.Sprintf(`env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'; `+
					`curl -s -H "x-api-key: $%[1]s" -H "Authorization: Bearer $%[1]s" http://echo.test:%[2]s/; echo PROBE-DONE`, rt.keyVar, echoPort)
				r := runAgentrun(t, invocation{args: args, prompt: "scenario:probe probe<<<" + probe + ">>>",
					env: []string{rt.binEnv() + "=" + rt.bin(t), rt.keyVar + "=" + real}, timeout: 2 * time.Minute})

				end := r.end()
				if end == nil || end.Status != events.StatusFinished || end.Result == nil || !strings.Contains(*end.Result, "PROBE-DONE") {
					// The mock's ledger and the raw output's end say which
					// call went wrong (the raw output holds stand-ins only).
					result := "<none>"
					if end != nil && end.Result != nil {
						result = *end.Result
					}
					raw := r.raw[max(0, len(r.raw)-4096):]
					t.Fatalf("end %+v\nresult %q\nstderr %s\nmock's calls %+v\nraw output's end %s", end, result, r.stderr, srv.Ledger(), raw)
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
				if !rt.shellScrubsKey && !strings.Contains(echoed.String(), credentials.StandInPrefix) {
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
				if !checkMeter(t, end, ledger) {
					// Which call the meter missed, and why, is in the CLI's
					// own output (a retry, an error it read).
					t.Logf("stderr %s\nraw output's end %s", r.stderr, r.raw[max(0, len(r.raw)-4096):])
				}
			})
		}
	}
}

// checkMeter: end.meter counts every call the mock answered in full, with
// the mock's own numbers, and agrees with end.usage. A stream the CLI cut
// (the mock's Aborted: a CLI may drop a stream and retry it) carried no
// usage, so the meter may count it only as unmetered, and then matches is
// false; if the CLI went away before the answer's headers reached the
// proxy, the meter never saw it at all. A call the CLI sent again (a later
// call of the same step) may have been dropped after the mock had written
// all of it, which the mock cannot see: the meter counted it whole, or as
// unmetered if its end never reached the proxy's meter.
func checkMeter(t errorer, end *events.End, ledger []mockmodel.Call) bool {
	t.Helper()
	var base events.Meter
	cut := 0
	var resent []mockmodel.Call
	for i, c := range ledger {
		switch {
		case c.Status != 200:
		case c.Aborted:
			cut++
		case sentAgain(ledger, i):
			resent = append(resent, c)
		default:
			addCall(&base, c)
		}
	}
	if len(resent) > maxResent {
		addCall(&base, resent[maxResent:]...)
		resent = resent[:maxResent]
	}
	// Each way the resent calls may have been counted: whole (bit set) or
	// as unmetered.
	for ways := 0; ways < 1<<len(resent); ways++ {
		want, mayCut := base, cut
		for i, c := range resent {
			if ways&(1<<i) != 0 {
				addCall(&want, c)
			} else {
				mayCut++
			}
		}
		if end.Meter != nil && end.Meter.Unmetered <= mayCut {
			want.Unmetered = end.Meter.Unmetered
		}
		want.Matches = want.Unmetered == 0
		if end.Meter != nil && *end.Meter == want {
			return true
		}
	}
	addCall(&base, resent...)
	t.Errorf("end.meter %+v, want %+v with at most %d unmetered, or with some of the %d calls sent again unmetered instead (end.usage %s; the mock's ledger %+v)",
		end.Meter, base, cut, len(resent), show(end.Usage), ledger)
	return false
}

// errorer is what checkMeter needs of a test.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// maxResent bounds the calls sent again whose ways checkMeter tries (2^n);
// past it they count whole.
const maxResent = 6

// sentAgain reports whether a later call of the ledger is the same step of
// the same agent's conversation: the CLI sent ledger[i] again.
func sentAgain(ledger []mockmodel.Call, i int) bool {
	c := ledger[i]
	for _, later := range ledger[i+1:] {
		if later.Role == c.Role && later.Kind == c.Kind && later.Scenario == c.Scenario && later.Step == c.Step {
			return true
		}
	}
	return false
}

// addCall adds the mock's counts of calls to m.
func addCall(m *events.Meter, calls ...mockmodel.Call) {
	for _, c := range calls {
		m.Calls++
		m.InputTokens += c.Usage.InputTokens
		m.OutputTokens += c.Usage.OutputTokens
		m.CacheReadTokens += c.Usage.CacheReadTokens
		m.CacheWriteTokens += c.Usage.CacheWriteTokens
	}
}

// TestCredentialBadInput: a --credential that cannot work ends the run as
// rejected, with the fix, before anything starts, and never shows a value.
func TestCredentialBadInput(t *testing.T) {
	badCA := filepath.Join(t.TempDir(), "not-a-ca.pem")
	if err := os.WriteFile(badCA, []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	const real = "sk-real-bad-input-0123"
	tests := []struct {
		name   string
		args   []string
		env    []string
		detail string
	}{
		{"unset", []string{"--credential", "MISSING_KEY=api.test:443"}, nil, "MISSING_KEY is not set in agentrun's environment"},
		{"empty", []string{"--credential", "EMPTY_KEY=api.test:443"}, []string{"EMPTY_KEY="}, "the variable EMPTY_KEY is empty"},
		{"no port", []string{"--credential", "KEY=api.test"}, []string{"KEY=" + real}, "is not HOST:PORT"},
		{"bad host", []string{"--credential", "KEY=bad host:443"}, []string{"KEY=" + real}, "is not a host name"},
		{"private address", []string{"--credential", "KEY=10.0.0.7:8080"}, []string{"KEY=" + real}, "needs an explicit --allow-host 10.0.0.7:8080"},
		{"private by --add-host", []string{"--credential", "KEY=gw.test:8080", "--add-host", "gw.test=10.0.0.7"}, []string{"KEY=" + real},
			"needs an explicit --allow-host 10.0.0.7:8080"},
		{"also --env", []string{"--credential", "KEY=api.test:443", "--env", "KEY=x"}, []string{"KEY=" + real}, "is also set by --env"},
		{"bad upstream CA", []string{"--credential", "KEY=api.test:443", "--upstream-ca", badCA}, []string{"KEY=" + real}, "not a readable PEM bundle"},
		{"bad CA for the CLI", []string{"--credential", "KEY=api.test:443", "--env", "NODE_EXTRA_CA_CERTS=" + badCA}, []string{"KEY=" + real},
			"which the CLI could not load either"},
		{"no sandbox", []string{"--credential", "KEY=api.test:443", "--sandbox", "none"}, []string{"KEY=" + real}, "needs the sandbox"},
		{"no network", []string{"--credential", "KEY=api.test:443", "--network", "none"}, []string{"KEY=" + real}, "needs network access"},
		{"twice", []string{"--credential", "KEY=a.test:443", "--credential", "KEY=b.test:443"}, []string{"KEY=" + real}, "is given twice"},
		{"other scheme", []string{"--credential", "KEY=ftp://a.test:21"}, []string{"KEY=" + real}, "only http://"},
		{"plain and TLS", []string{"--credential", "KEY=http://a.test:8080", "--credential", "KEY2=a.test:8080"}, []string{"KEY=" + real, "KEY2=" + real},
			"is listed both as http://a.test:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAgentrun(t, invocation{args: append([]string{"--runtime", "claude-code", "--cwd", t.TempDir()}, tt.args...), prompt: "hi",
				env: append([]string{"AGENTRUN_CLAUDE_BIN=/bin/false"}, tt.env...)})
			end := r.end()
			if len(r.events) != 1 || end == nil || end.Status != events.StatusRejected || !strings.Contains(end.Detail, tt.detail) || r.exit != 2 {
				t.Fatalf("got %s (exit %d); want a single rejected end containing %q", r.stdout, r.exit, tt.detail)
			}
			if strings.Contains(string(r.stdout)+string(r.stderr), real) {
				t.Errorf("the value appears in the output")
			}
		})
	}
}

// TestMeterHoldsMaxTokens: a CLI that reports no usage at all cannot
// overrun --max-tokens: the proxy meters the calls, refuses the ones past
// the limit, and the run ends with limit.
func TestMeterHoldsMaxTokens(t *testing.T) {
	const real = "sk-real-meter-0123456789"
	srv, err := mockmodel.Start(mockmodel.Options{APIKey: real})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	body := `{"model":"claude-sonnet-5-5","max_tokens":100,"stream":false,"messages":[{"role":"user","content":"scenario:tool go"}],"tools":[{"name":"Bash"}]}`
	// Each call is a new conversation of 130 tokens; nothing is printed,
	// and the stop (SIGINT) is ignored: the proxy must hold the line.
	script := fmt.Sprintf(`trap '' INT
for i in 1 2 3 4 5 6 7 8 9 10; do
  curl -s -o /dev/null -w "%%{http_code}\n" -H "x-api-key: $ANTHROPIC_API_KEY" -H "content-type: application/json" -d '%s' http://%s:%s/v1/messages >&2
done`, body, mockHost, u.Port())
	bin := fakeCLI(t, nil, script)
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(), "--max-tokens", "500",
		"--credential", "ANTHROPIC_API_KEY=http://" + mockHost + ":" + u.Port(), "--add-host", mockHost + "=127.0.0.1", "--allow-host", "127.0.0.1:" + u.Port()},
		prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "ANTHROPIC_API_KEY=" + real}})
	end := r.end()
	if end == nil || end.Status != events.StatusLimit || !strings.Contains(end.Detail, "--max-tokens 500 reached") || !strings.Contains(end.Detail, "metered") {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	served := 0
	for _, c := range srv.Ledger() {
		if c.Status == 200 {
			served++
		}
	}
	if served != 4 {
		t.Errorf("the mock served %d calls; want 4 (the 4th passes 500 tokens, later ones are refused at the proxy)", served)
	}
	if !strings.Contains(string(r.stderr), "429") {
		t.Errorf("no call was refused at the proxy: %s", r.stderr)
	}
	if end.Meter == nil || end.Meter.Calls != 4 || end.Meter.Matches {
		t.Errorf("end.meter %+v: four calls metered, none reported by the CLI", end.Meter)
	}
}

// TestMaxTokensCountsACallUnderWay: a streamed call's input tokens count
// toward --max-tokens from the stream's first event, while the call is
// still under way: an agent that keeps a call open (a slow model here; an
// agent that stops reading is the same to the proxy) does not hold the
// limit off until it ends. The mock's slow stream runs for ten minutes;
// the run ends limit long before, with the call's input counted.
func TestMaxTokensCountsACallUnderWay(t *testing.T) {
	const real = "sk-real-underway-0123456789"
	srv, err := mockmodel.Start(mockmodel.Options{APIKey: real, SlowMax: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	body := `{"model":"claude-sonnet-5-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"scenario:slow go"}],"tools":[{"name":"Bash"}]}`
	script := fmt.Sprintf(`curl -sN -o /dev/null -H "x-api-key: $ANTHROPIC_API_KEY" -H "content-type: application/json" -d '%s' http://%s:%s/v1/messages`,
		body, mockHost, u.Port())
	bin := fakeCLI(t, nil, script)
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(), "--max-tokens", "50", "--timeout", "5m",
		"--credential", "ANTHROPIC_API_KEY=http://" + mockHost + ":" + u.Port(), "--add-host", mockHost + "=127.0.0.1", "--allow-host", "127.0.0.1:" + u.Port()},
		prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "ANTHROPIC_API_KEY=" + real}})
	end := r.end()
	if end == nil || end.Status != events.StatusLimit || !strings.Contains(end.Detail, "--max-tokens 50 reached") ||
		!strings.Contains(end.Detail, "calls under way included") {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	// The mock records the call once it sees the client gone.
	var l []mockmodel.Call
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if l = srv.Ledger(); len(l) > 0 {
			break
		}
	}
	if len(l) != 1 || !l[0].Aborted {
		t.Fatalf("the mock's ledger %+v: one slow call, cut by the run's end", l)
	}
	if u := l[0].Usage; u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens <= 50 {
		t.Errorf("the slow call's input %+v is not past the limit", u)
	}
}

// recordedErrors is an errorer that keeps what was reported.
type recordedErrors struct{ errs []string }

func (r *recordedErrors) Helper() {}
func (r *recordedErrors) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheckMeter: the meter's counts must be the mock's, a call the CLI
// sent again may be counted whole or as unmetered (as a CI run of dsh
// showed: its second call dropped after the mock had written it all), and
// anything else fails.
func TestCheckMeter(t *testing.T) {
	call := func(step int, in, out, cache int64, aborted bool) mockmodel.Call {
		return mockmodel.Call{Scenario: "probe", Role: mockmodel.RoleMain, Step: step, Status: 200, Aborted: aborted,
			Usage: mockmodel.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: cache}}
	}
	once := []mockmodel.Call{call(0, 200, 30, 1000, false), call(1, 210, 35, 2000, false)}
	resent := []mockmodel.Call{call(0, 200, 30, 1000, false), call(1, 210, 35, 2000, false), call(1, 210, 35, 2000, false)}
	cut := []mockmodel.Call{call(0, 200, 30, 1000, false), call(1, 210, 35, 2000, true), call(1, 210, 35, 2000, false)}
	whole := events.Meter{Calls: 2, InputTokens: 410, OutputTokens: 65, CacheReadTokens: 3000, Matches: true}
	withUnmetered := events.Meter{Calls: 2, InputTokens: 410, OutputTokens: 65, CacheReadTokens: 3000, Unmetered: 1}
	for _, tc := range []struct {
		name   string
		meter  events.Meter
		ledger []mockmodel.Call
		ok     bool
	}{
		{"each call once, all counted", whole, once, true},
		{"each call once, one unmetered", withUnmetered, once, false},
		{"each call once, one missing", events.Meter{Calls: 1, InputTokens: 200, OutputTokens: 30, CacheReadTokens: 1000, Matches: true}, once, false},
		{"a call sent again, the dropped one unmetered", withUnmetered, resent, true},
		{"a call sent again, both counted", events.Meter{Calls: 3, InputTokens: 620, OutputTokens: 100, CacheReadTokens: 5000, Matches: true}, resent, true},
		{"a call sent again, counted twice over", events.Meter{Calls: 4, InputTokens: 830, OutputTokens: 135, CacheReadTokens: 7000, Matches: true}, resent, false},
		{"a call sent again, tokens wrong", events.Meter{Calls: 2, InputTokens: 400, OutputTokens: 65, CacheReadTokens: 3000, Unmetered: 1}, resent, false},
		{"a cut call unmetered", withUnmetered, cut, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recordedErrors
			m := tc.meter
			if got := checkMeter(&rec, &events.End{Meter: &m}, tc.ledger); got != tc.ok || (len(rec.errs) == 0) != tc.ok {
				t.Errorf("checkMeter = %v (%q), want %v", got, rec.errs, tc.ok)
			}
		})
	}
}
