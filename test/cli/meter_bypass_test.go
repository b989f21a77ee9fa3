package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

// meteredUpstream is a credential destination that answers every kind of
// call an agent could use to spend tokens past the meter, each "worth"
// 10,000 tokens: Message Batches and their results, messages under odd
// spellings of the path, a background response and its polling, the
// legacy completions, an answer too large for the meter, an answer
// without usage. It records the requests that reached it.
func meteredUpstream(t *testing.T) (port string, seen *lockedBuffer) {
	t.Helper()
	seen = &lockedBuffer{}
	const usage = `"usage":{"input_tokens":5000,"output_tokens":5000}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(seen, "%s %s\n", r.Method, r.URL.RequestURI())
		p := strings.TrimRight(strings.Split(r.URL.Path, ";")[0], "/")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(p, "/messages/batches"):
			fmt.Fprint(w, `{"id":"msgbatch_1","type":"message_batch","processing_status":"in_progress"}`)
		case strings.HasSuffix(p, "/results"):
			fmt.Fprintln(w, `{"custom_id":"a","result":{"type":"succeeded","message":{"type":"message","model":"m","content":[],`+usage+`}}}`)
		case strings.HasSuffix(strings.ToLower(p), "/messages") && r.URL.Query().Has("nousage"):
			fmt.Fprint(w, `{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}]}`)
		case strings.HasSuffix(strings.ToLower(p), "/messages"):
			fmt.Fprint(w, `{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],`+usage+`}`)
		case r.Method == "POST" && strings.HasSuffix(p, "/responses"):
			fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"queued","background":true,"model":"m"}`)
		case strings.HasSuffix(p, "/responses/resp_1"):
			fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"completed","model":"m","usage":{"input_tokens":5000,"output_tokens":5000}}`)
		case strings.HasSuffix(p, "/chat/completions"):
			// ~9 MiB of logprobs, the usage at the end.
			var b bytes.Buffer
			b.WriteString(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`)
			b.WriteString(strings.Repeat("x", 9<<20))
			b.WriteString(`"}}],"usage":{"prompt_tokens":5000,"completion_tokens":5000}}`)
			w.Write(b.Bytes())
		case strings.HasSuffix(p, "/completions"):
			fmt.Fprint(w, `{"id":"c","object":"text_completion","model":"m","choices":[{"text":"hi"}],"usage":{"prompt_tokens":5000,"completion_tokens":5000}}`)
		case strings.HasSuffix(p, "/models"):
			fmt.Fprint(w, `{"data":[{"id":"m","type":"model"}]}`)
		default:
			w.WriteHeader(404)
			fmt.Fprint(w, `{}`)
		}
	}))
	t.Cleanup(up.Close)
	_, port, _ = net.SplitHostPort(up.Listener.Addr().String())
	return port, seen
}

// endMeter is the end event's meter as written, with fields this test
// knows of or not.
func endMeter(t *testing.T, r *result) map[string]any {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(r.stdout), []byte("\n"))
	var end struct {
		Meter map[string]any `json:"meter"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &end); err != nil || end.Meter == nil {
		t.Fatalf("no end.meter: %v %s", err, lines[len(lines)-1])
	}
	return end.Meter
}

// TestMeterCannotBeBypassed: with --max-tokens, every call the agent makes
// to a credential destination is either counted by the meter or refused
// before it goes upstream (403, network reason unmetered); a model call
// whose answer the meter cannot read ends the run at the limit. The fake
// CLI reports no usage at all and ignores the stop.
func TestMeterCannotBeBypassed(t *testing.T) {
	port, seen := meteredUpstream(t)
	base := "http://api.test:" + port
	for _, tt := range []struct {
		name, calls string
		refused     bool // refused at the proxy, nothing upstream; else the run ends limit
	}{
		{"batches", `-X POST -d '{}' %[1]s/v1/messages/batches; c %[1]s/v1/messages/batches/msgbatch_1/results`, true},
		{"other APIs", `-X POST -d '{}' %[1]s/v1/batches; c -X POST -d '{}' %[1]s/v1/complete; c -X PUT -d '{}' %[1]s/v1/messages`, true},
		{"trailing slash", `-X POST -d '{}' %[1]s/v1/messages/`, false},
		{"params", `-X POST -d '{}' '%[1]s/v1/messages;x=1'`, false},
		{"double slash", `-X POST -d '{}' %[1]s//v1//messages`, false},
		{"encoded", `-X POST -d '{}' %[1]s/v1/%%6Dessages`, false},
		{"case", `-X POST -d '{}' %[1]s/V1/Messages`, false},
		{"background", `-X POST -d '{"background":true}' %[1]s/v1/responses; c %[1]s/v1/responses/resp_1`, false},
		{"legacy completions", `-X POST -d '{}' %[1]s/v1/completions`, false},
		{"answer too large", `-X POST -d '{}' %[1]s/v1/chat/completions`, false},
		{"no usage", `-X POST -d '{}' '%[1]s/v1/messages?nousage=1'`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			*seen = lockedBuffer{}
			// Each is tried three times: no call may pass the limit.
			script := "trap '' INT\nc() { curl -s -o /dev/null -w \"call %{http_code}\\n\" -H \"x-api-key: $KEY\" \"$@\" >&2; }\n" +
				"for i in 1 2 3; do c " + fmt.Sprintf(tt.calls, base) + "; done\n" +
				"c " + base + "/v1/models\n"
			bin := fakeCLI(t, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok"}`+"\n"), script)
			r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(), "--max-tokens", "1000",
				"--credential", "KEY=http://api.test:" + port, "--add-host", "api.test=127.0.0.1", "--allow-host", "127.0.0.1:" + port},
				prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=sk-real-bypass-0123456789"}})
			end := r.end()
			if end == nil {
				t.Fatalf("no end: %s", r.stderr)
			}
			out, got := string(r.stderr), seen.String()
			if tt.refused {
				if strings.Contains(got, "/v1/messages/batches") || strings.Contains(got, "/v1/batches") || strings.Contains(got, "/v1/complete") || strings.Contains(got, "PUT") {
					t.Errorf("a call the meter cannot count went upstream: %s", got)
				}
				if strings.Contains(out, "call 200\ncall 200\ncall 200\ncall 200") || !strings.Contains(out, "call 403") {
					t.Errorf("the calls were not refused: %s", out)
				}
				if !strings.Contains(got, "GET /v1/models") {
					t.Errorf("GET /v1/models, which generates nothing, was refused: %s", got)
				}
				refused := false
				for _, e := range r.events {
					if a, ok := e.(*events.NetworkAccess); ok && !a.Allowed && *a.Reason == "unmetered" && a.Host == "api.test" {
						refused = true
					}
				}
				if !refused {
					t.Errorf("no network event with reason unmetered")
				}
				return
			}
			if end.Status != events.StatusLimit || !strings.Contains(end.Detail, "--max-tokens 1000") {
				t.Errorf("calls of 10,000 tokens against --max-tokens 1000 ended %s %q\nupstream %s\nstderr %s", end.Status, end.Detail, got, out)
			}
			if n := strings.Count(out, "call 200"); n > 1 {
				t.Errorf("%d calls were answered: %s", n, out)
			}
			if m := endMeter(t, r); m["matches"] == true {
				t.Errorf("end.meter %v: matches, with calls spent past the meter", m)
			}
		})
	}
}

// TestMeterCountsWhatItCannotRead: without --max-tokens nothing is
// refused, but calls the meter could not count are counted in
// end.meter.unmetered, and matches is false: the CLI's report cannot be
// confirmed.
func TestMeterCountsWhatItCannotRead(t *testing.T) {
	port, seen := meteredUpstream(t)
	base := "http://api.test:" + port
	script := fmt.Sprintf(`c() { curl -s -o /dev/null -w "call %%{http_code}\n" -H "x-api-key: $KEY" "$@" >&2; }
c -X POST -d '{}' %[1]s/v1/messages/batches
c %[1]s/v1/messages/batches/msgbatch_1/results
c -X POST -d '{}' '%[1]s/v1/messages?nousage=1'
c %[1]s/v1/models`, base)
	bin := fakeCLI(t, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok"}`+"\n"), script)
	meterFile := filepath.Join(t.TempDir(), "meter.json")
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(),
		"--credential", "KEY=http://api.test:" + port, "--add-host", "api.test=127.0.0.1", "--allow-host", "127.0.0.1:" + port,
		"--meter-file", meterFile},
		prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=sk-real-unmetered-0123456789"}})
	if end := r.end(); end == nil || end.Status != events.StatusFinished {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	if n := strings.Count(string(r.stderr), "call 200"); n != 4 {
		t.Errorf("without --max-tokens nothing is refused: %s\nupstream %s", r.stderr, seen.String())
	}
	m := endMeter(t, r)
	if m["matches"] != false || m["unmetered"] != float64(3) || m["calls"] != float64(0) {
		t.Errorf("end.meter %v: want 3 unmetered calls (the batch, its results, the message without usage), matches false", m)
	}
	// The live count (status.progress.unmeteredCalls) says so too.
	if live, ok := progress.ReadMeterFile(meterFile); !ok || live.Unmetered != 3 {
		t.Errorf("--meter-file %+v (read %v): want 3 unmetered calls", live, ok)
	}
	if !strings.Contains(string(r.stderr), "could not be metered") {
		t.Errorf("no warning on stderr: %s", r.stderr)
	}
}
