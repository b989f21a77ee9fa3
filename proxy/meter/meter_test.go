package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// call posts body to the mock at path and reads the response through the
// meter, as the proxy passes it to the CLI.
func call(t *testing.T, m *Meter, s *mockmodel.Server, path string, body any) []byte {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.URL()+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(req, resp)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v %s", path, resp.StatusCode, err, b)
	}
	return b
}

// The meter's per-call numbers equal the mock's ledger, for each API,
// streamed and not.
func TestMeterMatchesTheLedger(t *testing.T) {
	user := func(text string) any {
		return map[string]any{"role": "user", "content": text}
	}
	tests := []struct {
		name string
		api  API
		path string
		body func(stream bool) any
	}{
		{"anthropic", Anthropic, "/v1/messages?beta=true", func(stream bool) any {
			return map[string]any{"model": "claude-sonnet-5-5", "stream": stream, "max_tokens": 1000,
				"messages": []any{user("scenario:tool go")}, "tools": []any{map[string]any{"name": "Bash"}}}
		}},
		{"responses", Responses, "/v1/responses", func(stream bool) any {
			return map[string]any{"model": "gpt-5.5", "stream": stream, "tools": []any{map[string]any{"type": "function", "name": "exec_command"}},
				"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "scenario:tool go"}}}}}
		}},
		{"chat", Chat, "/v1/chat/completions", func(stream bool) any {
			b := map[string]any{"model": "mock-gpt", "stream": stream, "messages": []any{user("scenario:tool go")},
				"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}}
			if stream {
				b["stream_options"] = map[string]any{"include_usage": true}
			}
			return b
		}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{true, false} {
			name := tt.name + map[bool]string{true: " stream", false: " whole"}[stream]
			t.Run(name, func(t *testing.T) {
				s, err := mockmodel.Start(mockmodel.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				m := &Meter{}
				var seen []Call
				m.OnCall = func(c Call, _ Usage) { seen = append(seen, c) }
				body := call(t, m, s, tt.path, tt.body(stream))
				ledger := s.Ledger()
				if len(ledger) != 1 || len(seen) != 1 {
					t.Fatalf("ledger %d calls, meter %d (body %.300s)", len(ledger), len(seen), body)
				}
				want := ledger[0].Usage
				got := seen[0]
				if got.API != tt.api || got.Stream != stream || !got.Complete || got.Model != ledger[0].Model ||
					got.Usage != (Usage{InputTokens: want.InputTokens, OutputTokens: want.OutputTokens,
						CacheReadTokens: want.CacheReadTokens, CacheWriteTokens: want.CacheWriteTokens}) {
					t.Errorf("metered %+v, ledger %+v", got, ledger[0])
				}
				if m.Total() != got.Usage || got.Usage.Total() == 0 {
					t.Errorf("total %+v", m.Total())
				}
			})
		}
	}
}

// Free calls and error answers are not counted, as calls or as calls the
// meter could not read.
func TestMeterLeavesOtherResponsesAlone(t *testing.T) {
	m := &Meter{}
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/models", 200},
		{"POST", "/v1/messages/count_tokens", 200},
		{"POST", "/v1/messages", 401},
		{"POST", "/v1/messages/batches", 400},
		{"POST", "/api/hello", 500},
	} {
		req, _ := http.NewRequest(tt.method, "http://x"+tt.path, nil)
		body := io.NopCloser(strings.NewReader(`{"usage":{"input_tokens":5,"output_tokens":5}}`))
		resp := &http.Response{StatusCode: tt.status, Body: body, Header: http.Header{}}
		m.Watch(req, resp)
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(m.Calls()) != 0 || m.UnreadableCalls() != 0 {
		t.Errorf("metered %+v, %d unreadable", m.Calls(), m.UnreadableCalls())
	}
}

// A stream cut before its final usage counts what was reported, marked
// incomplete; bytes pass unchanged; an oversized line is skipped, and
// makes the call one the meter could not read (it may have held the
// usage).
func TestMeterStreamEdges(t *testing.T) {
	stream := "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":3,\"cache_creation_input_tokens\":2,\"output_tokens\":1}}}\r\n\r\n" +
		"data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"" + strings.Repeat("x", maxLine+10) + "\"}}\n\n"
	var why []string
	m := &Meter{OnUnreadable: func(w string) { why = append(why, w) }}
	req, _ := http.NewRequest("POST", "http://x/v1/messages", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(stream))}
	m.Watch(req, resp)
	// Read in small pieces, as a network would deliver it.
	var out bytes.Buffer
	buf := make([]byte, 7)
	for {
		n, err := resp.Body.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if out.String() != stream {
		t.Errorf("the body changed in passing")
	}
	calls := m.Calls()
	if len(calls) != 1 || calls[0].Complete || calls[0].Usage != (Usage{InputTokens: 10, OutputTokens: 1, CacheReadTokens: 3, CacheWriteTokens: 2}) || calls[0].Model != "m" {
		t.Errorf("calls %+v", calls)
	}
	if len(why) != 1 || !strings.Contains(why[0], "over 8 MiB") {
		t.Errorf("unreadable %q", why)
	}
}

// TestMeterFailsClosed: a successful answer whose tokens the meter cannot
// count is never counted as nothing: it is reported as unreadable (and
// the runner ends a run with --max-tokens there). Only an API's error in
// place of a call is not a call.
func TestMeterFailsClosed(t *testing.T) {
	const sse, js = "text/event-stream", "application/json"
	big := strings.Repeat("x", maxLine)
	for _, tt := range []struct {
		name, method, path, ctype, body string
		why                             string // "" when not unreadable
		calls                           int
	}{
		{"no usage", "POST", "/v1/messages", js, `{"type":"message","model":"m","content":[]}`, "came without usage", 0},
		{"usage null", "POST", "/v1/chat/completions", js, `{"model":"m","usage":null}`, "came without usage", 0},
		{"empty", "POST", "/v1/responses", js, ``, "came without usage", 0},
		{"body too large", "POST", "/v1/chat/completions", js, `{"model":"m","x":"` + big + `","usage":{"prompt_tokens":5000,"completion_tokens":5000}}`, "over 8 MiB", 0},
		{"stream without usage", "POST", "/v1/chat/completions", sse, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", "came without usage", 0},
		{"stream cut before usage", "POST", "/v1/responses", sse, "data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n", "came without usage", 0},
		{"usage in a line too large", "POST", "/v1/responses", sse, "data: {\"type\":\"response.completed\",\"response\":{\"x\":\"" + big + "\",\"usage\":{\"input_tokens\":5000,\"output_tokens\":5000}}}\n\n", "line over 8 MiB", 0},
		{"an API error first", "POST", "/v1/messages", sse, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n", "", 0},
		{"an error after the start", "POST", "/v1/messages", sse, "data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\ndata: {\"type\":\"error\",\"error\":{}}\n\n", "before its final usage", 1},
		{"stream cut after the start", "POST", "/v1/messages", sse, "data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\ndata: {\"type\":\"content_block_delta\"}\n\n", "before its final usage", 1},
		{"an unknown call", "POST", "/v1/messages/batches", js, `{"id":"msgbatch_1"}`, "cannot tell what such a call costs", 0},
		{"an unknown call's 202", "GET", "/v1/messages/batches/b/results", js, `{}`, "answered 202", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var why []string
			m := &Meter{OnUnreadable: func(w string) { why = append(why, w) }}
			req, _ := http.NewRequest(tt.method, "http://api.test"+tt.path, nil)
			status := 200
			if strings.Contains(tt.name, "202") {
				status = 202
			}
			resp := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {tt.ctype}}, Body: io.NopCloser(strings.NewReader(tt.body))}
			m.Watch(req, resp)
			if b, _ := io.ReadAll(resp.Body); string(b) != tt.body {
				t.Errorf("the body changed in passing")
			}
			resp.Body.Close()
			if len(m.Calls()) != tt.calls {
				t.Errorf("calls %+v, want %d", m.Calls(), tt.calls)
			}
			if tt.why == "" && len(why) != 0 || tt.why != "" && (len(why) != 1 || !strings.Contains(why[0], tt.why) || m.UnreadableCalls() != 1) {
				t.Errorf("unreadable %q, want %q", why, tt.why)
			}
			if len(why) == 1 && !strings.Contains(why[0], `"`+tt.path+`" to api.test`) {
				t.Errorf("the reason does not name the call: %q", why[0])
			}
		})
	}
}

// TestMeterReportsCallsUnderWay: what a call's answer reports before its
// end (an Anthropic stream's input and cache tokens, in its first event)
// is in Reported and goes to OnReported at once, while the call is under
// way and its reader has read no further: a limit does not wait for the
// answer's end, which an agent that stops reading holds off. At the end
// the call moves from reported to recorded, counted once; a stream that
// reports only at its end (the OpenAI APIs) adds nothing before.
func TestMeterReportsCallsUnderWay(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":100,\"cache_read_input_tokens\":30,\"cache_creation_input_tokens\":20,\"output_tokens\":1}}}\n\n"
	const delta = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
	const end = "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tt := range []struct {
		name, path, ctype string
		pieces            []string // what the upstream sends, one piece at a time
		before            []int64  // Reported().Total() after each piece, read by the client
		calls             int
		total             int64 // recorded at the end
	}{
		{"anthropic stream", "/v1/messages", "text/event-stream", []string{start, delta, end}, []int64{151, 151, 190}, 1, 190},
		{"anthropic stream cut after its start", "/v1/messages", "text/event-stream", []string{start, delta}, []int64{151, 151}, 1, 151},
		{"responses stream", "/v1/responses", "text/event-stream", []string{
			"data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n",
			"data: {\"type\":\"response.completed\",\"response\":{\"model\":\"m\",\"usage\":{\"input_tokens\":100,\"output_tokens\":40}}}\n\n",
		}, []int64{0, 140}, 1, 140},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seen []int64
			m := &Meter{OnReported: func(total Usage) { seen = append(seen, total.Total()) }}
			pr, pw := io.Pipe()
			req, _ := http.NewRequest("POST", "http://api.test"+tt.path, nil)
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tt.ctype}}, Body: pr}
			m.Watch(req, resp)
			for i, piece := range tt.pieces {
				go func() { _, _ = io.WriteString(pw, piece) }()
				buf := make([]byte, len(piece))
				if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != piece {
					t.Fatalf("piece %d: %q %v", i, buf, err)
				}
				if got := m.Reported().Total(); got != tt.before[i] {
					t.Errorf("after piece %d: reported %d, want %d", i, got, tt.before[i])
				}
				if m.Total().Total() != 0 || len(m.Calls()) != 0 {
					t.Errorf("after piece %d: recorded before the end: %+v", i, m.Calls())
				}
			}
			pw.Close()
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if len(m.Calls()) != tt.calls || m.Total().Total() != tt.total || m.Reported() != m.Total() {
				t.Errorf("at the end: calls %+v, total %+v, reported %+v; want %d calls, %d tokens, reported = total",
					m.Calls(), m.Total(), m.Reported(), tt.calls, tt.total)
			}
			var want []int64
			for i, b := range tt.before {
				if b != 0 && (i == 0 || b != tt.before[i-1]) {
					want = append(want, b)
				}
			}
			if !slices.Equal(seen, want) {
				t.Errorf("OnReported saw %v, want %v", seen, want)
			}
		})
	}
}

// TestMeterCallsUnderWayTogether: several calls under way add up in
// Reported; one closed early (its client left) is recorded with what it
// had reported and counted once; a final usage that repeats the input
// replaces the reported values; at the end Reported is Total again.
func TestMeterCallsUnderWayTogether(t *testing.T) {
	const start = "data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":100,\"cache_read_input_tokens\":30,\"cache_creation_input_tokens\":20,\"output_tokens\":1}}}\n\n"
	const end = "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":100,\"cache_read_input_tokens\":30,\"cache_creation_input_tokens\":20,\"output_tokens\":40}}\n\ndata: {\"type\":\"message_stop\"}\n\n"
	m := &Meter{}
	type stream struct {
		w    *io.PipeWriter
		body io.ReadCloser
	}
	open := func() stream {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", "http://api.test/v1/messages", nil)
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr}
		m.Watch(req, resp)
		return stream{pw, resp.Body}
	}
	send := func(s stream, piece string) {
		t.Helper()
		go func() { _, _ = io.WriteString(s.w, piece) }()
		if _, err := io.ReadFull(s.body, make([]byte, len(piece))); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, reported, total int64) {
		t.Helper()
		if r, tt := m.Reported().Total(), m.Total().Total(); r != reported || tt != total {
			t.Errorf("%s: reported %d, total %d; want %d, %d", step, r, tt, reported, total)
		}
	}
	a, b := open(), open()
	send(a, start)
	check("a started", 151, 0)
	send(b, start)
	check("b started", 302, 0)
	a.body.Close() // a's client left
	check("a closed", 302, 151)
	send(b, end)
	check("b's final usage, before its end", 341, 151)
	b.w.Close()
	if _, err := io.ReadAll(b.body); err != nil {
		t.Fatal(err)
	}
	b.body.Close()
	check("b ended", 341, 341)
	if c := m.Calls(); len(c) != 2 || c[0].Complete || !c[1].Complete {
		t.Errorf("calls %+v: a cut, then b whole", c)
	}
}

// TestMeterIgnoresReadsAfterTheEnd: a body that still gives bytes after it
// was closed (the meter does not own what it wraps) adds nothing: the call
// was recorded at its close, and is not reported again.
func TestMeterIgnoresReadsAfterTheEnd(t *testing.T) {
	const stream = "data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n"
	var why []string
	m := &Meter{OnUnreadable: func(w string) { why = append(why, w) }}
	req, _ := http.NewRequest("POST", "http://api.test/v1/messages", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(stream))}
	m.Watch(req, resp)
	resp.Body.Close() // before a byte was read: a call without usage
	if b, _ := io.ReadAll(resp.Body); string(b) != stream {
		t.Errorf("the body changed in passing")
	}
	if m.Reported() != (Usage{}) || m.Total() != (Usage{}) || len(m.Calls()) != 0 || len(why) != 1 {
		t.Errorf("after reads past the close: reported %+v, total %+v, calls %+v, unreadable %q", m.Reported(), m.Total(), m.Calls(), why)
	}
}

// TestMeterReadsAWholeAnswerAhead: with ReadAhead, an answer without
// streaming is read whole before the client gets a byte, so the call is
// counted whether or not the client reads it; the client then reads it
// unchanged. One cut short reaches the client cut, with the same error,
// and counts as unreadable; one over maxLine counts as unreadable at once
// and passes whole. Without ReadAhead nothing is counted before the client
// reads.
func TestMeterReadsAWholeAnswerAhead(t *testing.T) {
	const answer = `{"type":"message","model":"m","content":[],"usage":{"input_tokens":100,"output_tokens":40}}`
	big := `{"x":"` + strings.Repeat("x", maxLine) + `","usage":{"input_tokens":100,"output_tokens":40}}`
	cut := errors.New("connection reset")
	for _, tt := range []struct {
		name      string
		readAhead bool
		body      string
		cut       bool
		total     int64
		why       string // unreadable, "" for none
	}{
		{"whole", true, answer, false, 140, ""},
		{"cut", true, answer[:40], true, 0, "came without usage"},
		{"over maxLine", true, big, false, 0, "over 8 MiB"},
		{"without ReadAhead", false, answer, false, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var why []string
			m := &Meter{OnUnreadable: func(w string) { why = append(why, w) }, ReadAhead: tt.readAhead}
			var upstream io.Reader = strings.NewReader(tt.body)
			if tt.cut {
				upstream = io.MultiReader(upstream, errReader{cut})
			}
			req, _ := http.NewRequest("POST", "http://api.test/v1/messages", nil)
			closed := false
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
				Body: readCloser{upstream, closerFunc(func() error { closed = true; return nil })}}
			m.Watch(req, resp)
			// Before the client reads a byte.
			if got := m.Total().Total(); got != tt.total {
				t.Errorf("counted before the client read: %d, want %d", got, tt.total)
			}
			if tt.why == "" && len(why) != 0 || tt.why != "" && (len(why) != 1 || !strings.Contains(why[0], tt.why)) {
				t.Errorf("unreadable %q, want %q", why, tt.why)
			}
			got, err := io.ReadAll(resp.Body)
			if string(got) != tt.body || tt.cut != errors.Is(err, cut) || !tt.cut && err != nil {
				t.Errorf("the client read %d bytes (%v); want the upstream's %d (cut: %v)", len(got), err, len(tt.body), tt.cut)
			}
			resp.Body.Close()
			if !closed {
				t.Error("the upstream's body was not closed")
			}
		})
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
