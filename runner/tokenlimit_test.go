package runner

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
	"github.com/agentrun-dev/agentrun/proxy/meter"
)

// TestTokenLimitCountsCallsUnderWay: --max-tokens is held against the
// meter's count with what calls still under way have reported, whichever
// call ends or reports: a stream held open (its input reported, its end
// never read) counts when another call ends, and the run's end says when
// calls under way were part of the count.
func TestTokenLimitCountsCallsUnderWay(t *testing.T) {
	// input 30 + cache 10 + output 1 = 41 reported by a stream's start.
	const start = "data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":30,\"cache_read_input_tokens\":10,\"output_tokens\":1}}}\n\n"
	const whole20 = `{"type":"message","model":"m","content":[],"usage":{"input_tokens":15,"output_tokens":5}}`
	for _, tt := range []struct {
		name   string
		held   int    // streams held open after their start
		whole  int    // calls of 20 tokens that end
		late   bool   // the calls come before the stopper exists
		detail string // the end's detail, "" for no stop
	}{
		{"a held stream under the limit", 1, 0, false, ""},
		{"held streams past the limit", 2, 0, false, "--max-tokens 50 reached: 82 tokens metered at the proxy (calls under way included)"},
		{"a held stream and a call that ends", 1, 1, false, "--max-tokens 50 reached: 61 tokens metered at the proxy (calls under way included)"},
		{"calls that end", 0, 3, false, "--max-tokens 50 reached: 60 tokens metered at the proxy"},
		{"calls that end, under the limit", 0, 2, false, ""},
		{"held streams before the stopper", 2, 0, true, "--max-tokens 50 reached: 82 tokens metered at the proxy (calls under way included)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			agent := exec.Command("sleep", "60")
			if err := agent.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
			intercept := &credentials.Interceptor{}
			r := &run{o: Options{RunFlags: podcontract.RunFlags{MaxTokens: 50}}, p: &prepared{creds: &creds{intercept: intercept}},
				stderr: io.Discard} // the held streams' cut at the end warns
			r.meter = r.newMeter()
			st := &stopper{proc: &process{cmd: agent, agentPid: agent.Process.Pid, exited: make(chan struct{})}, grace: time.Minute}
			if !tt.late {
				r.startProxyStop(st)
			}
			for range tt.held {
				pr, pw := io.Pipe()
				defer pw.Close()
				resp := watch(r.meter, "text/event-stream", pr)
				go func() { _, _ = io.WriteString(pw, start) }()
				if _, err := io.ReadFull(resp.Body, make([]byte, len(start))); err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
			}
			for range tt.whole {
				resp := watch(r.meter, "application/json", io.NopCloser(strings.NewReader(whole20)))
				if _, err := io.ReadAll(resp.Body); err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}

			if tt.late {
				r.startProxyStop(st)
			}
			cause, detail := st.result()
			refused := intercept.Request("api.test", 443, httptestRequest()) != nil
			if tt.detail == "" {
				if cause != "" || refused {
					t.Errorf("stopped (%s %q) or refused (%v) under the limit", cause, detail, refused)
				}
				return
			}
			if cause != events.StatusLimit || detail != tt.detail || !refused {
				t.Errorf("end %s %q, refused %v; want limit %q, refused", cause, detail, refused, tt.detail)
			}
		})
	}
}

// watch passes an answer of the given type through the meter, as the
// proxy does for a model call to api.test.
func watch(m *meter.Meter, ctype string, body io.ReadCloser) *http.Response {
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ctype}}, Body: body}
	m.Watch(httptestRequest(), resp)
	return resp
}

func httptestRequest() *http.Request {
	req, _ := http.NewRequest(http.MethodPost, "https://api.test/v1/messages", nil)
	return req
}

// TestMeterReadsAheadWithALimit: answers without streaming are read ahead
// (held back until their end) only when --max-tokens needs it.
func TestMeterReadsAheadWithALimit(t *testing.T) {
	for _, max := range []int64{0, 50} {
		r := &run{o: Options{RunFlags: podcontract.RunFlags{MaxTokens: max}}}
		if got := r.newMeter().ReadAhead; got != (max > 0) {
			t.Errorf("--max-tokens %d: ReadAhead %v", max, got)
		}
	}
}
