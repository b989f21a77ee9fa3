package credentials

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/proxy/meter"
)

// testInterceptor has one credential for api.test:443 and a meter.
func testInterceptor(t *testing.T) (*Interceptor, *Credential, *meter.Meter) {
	t.Helper()
	c, err := Parse("KEY=api.test:443", lookup(map[string]string{"KEY": real}))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := NewSet([]*Credential{c})
	m := &meter.Meter{}
	return &Interceptor{Set: set, Meter: m}, c, m
}

func modelCall() *http.Request {
	r, _ := http.NewRequest("POST", "https://api.test/v1/messages", nil)
	return r
}

const modelAnswer = `{"type":"message","model":"m","echo":"` + real + `","usage":{"input_tokens":5000,"output_tokens":5000}}`

func compress(t *testing.T, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zlib":
		w = zlib.NewWriter(&buf)
	case "raw deflate":
		w, _ = flate.NewWriter(&buf, flate.DefaultCompression)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// TestInterceptorAsksForNoEncoding: whatever the agent accepts, the
// upstream is asked for an answer the proxy can read.
func TestInterceptorAsksForNoEncoding(t *testing.T) {
	i, _, _ := testInterceptor(t)
	r := modelCall()
	r.Header.Add("Accept-Encoding", "gzip, br")
	r.Header.Add("Accept-Encoding", "zstd")
	if refusal := i.Request("api.test", 443, r); refusal != nil {
		t.Fatal(refusal)
	}
	if got := r.Header.Values("Accept-Encoding"); len(got) != 1 || got[0] != "identity" {
		t.Errorf("Accept-Encoding %q, want identity", got)
	}
}

// TestInterceptorDecodesGzipAndDeflate: an upstream that compresses anyway
// is read: the meter counts the call, the real value is taken out, and the
// client gets the plain body.
func TestInterceptorDecodesGzipAndDeflate(t *testing.T) {
	for _, tt := range []struct {
		header string
		body   []byte
	}{
		{"gzip", compress(t, "gzip", []byte(modelAnswer))},
		{"X-Gzip", compress(t, "gzip", []byte(modelAnswer))},
		{"deflate", compress(t, "zlib", []byte(modelAnswer))},
		{"deflate", compress(t, "raw deflate", []byte(modelAnswer))},
		{"gzip, gzip", compress(t, "gzip", compress(t, "gzip", []byte(modelAnswer)))},
		{"identity", []byte(modelAnswer)},
	} {
		i, c, m := testInterceptor(t)
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Encoding": {tt.header}, "Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(tt.body)), ContentLength: int64(len(tt.body))}
		if ref := i.Response("api.test", 443, modelCall(), resp); ref != nil {
			t.Errorf("%s: refused %+v", tt.header, ref)
			continue
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := strings.ReplaceAll(modelAnswer, real, c.StandIn); err != nil || string(got) != want {
			t.Errorf("%s: body %q, %v", tt.header, got, err)
		}
		if resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: Content-Encoding %q left on a decoded body", tt.header, resp.Header.Get("Content-Encoding"))
		}
		if calls := m.Calls(); len(calls) != 1 || calls[0].Usage.Total() != 10000 {
			t.Errorf("%s: metered %+v", tt.header, calls)
		}
	}
}

// TestInterceptorRefusesUnreadableEncodings: an answer the proxy cannot
// decode is refused, whatever it is for; one to a call that may have
// spent tokens (a model call, a call the meter does not know) makes the
// meter say it could not count it, one to a free call does not.
func TestInterceptorRefusesUnreadableEncodings(t *testing.T) {
	for _, enc := range []string{"br", "zstd", "compress", "gzip, br", "x-custom", "gzip, gzip, gzip, gzip"} {
		for _, call := range []string{"POST /v1/messages", "POST /echo", "GET /v1/models"} {
			method, path, _ := strings.Cut(call, " ")
			i, _, m := testInterceptor(t)
			var why []string
			m.OnUnreadable = func(w string) { why = append(why, w) }
			r, _ := http.NewRequest(method, "https://api.test"+path, nil)
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Encoding": {enc}}, Body: io.NopCloser(strings.NewReader("\x00" + real))}
			ref := i.Response("api.test", 443, r, resp)
			if ref == nil || ref.Reason != proxy.ReasonUnsupportedEncoding || strings.Contains(ref.Detail, real) {
				t.Errorf("%s %s: %+v", enc, path, ref)
			}
			if spends := method == "POST"; spends != (m.UnreadableCalls() == 1 && len(why) == 1) {
				t.Errorf("%s %s: the meter was told of %d unreadable calls (%q)", enc, path, m.UnreadableCalls(), why)
			}
		}
	}
}

// TestInterceptorDecodedStreamIsNotHeldBack: a gzip stream that the
// upstream flushes event by event reaches the client event by event.
func TestInterceptorDecodedStreamIsNotHeldBack(t *testing.T) {
	i, _, _ := testInterceptor(t)
	pr, pw := io.Pipe()
	zw := gzip.NewWriter(pw)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Encoding": {"gzip"}, "Content-Type": {"text/event-stream"}}, Body: pr}
	if ref := i.Response("api.test", 443, modelCall(), resp); ref != nil {
		t.Fatal(ref)
	}
	go func() {
		zw.Write([]byte("event: ping\ndata: {\"type\":\"ping\"}\n\n"))
		zw.Flush()
	}()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 256)
		n, _ := resp.Body.Read(buf)
		got <- string(buf[:n])
	}()
	select {
	case first := <-got:
		if !strings.HasPrefix(first, "event: ping") {
			t.Errorf("first read %q", first)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event of a compressed stream waited for the rest")
	}
	pw.Close()
}
