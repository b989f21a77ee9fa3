// Package meter counts the tokens of every model call that passes through
// the filter proxy to a credential host, from the usage the model API
// itself reports in its responses (Anthropic Messages, OpenAI Responses and
// Chat Completions; streamed and not), independent of what the agent's CLI
// prints. The runner compares the metered totals with the adapter's
// end.usage and enforces --max-tokens with them, so a CLI that under-reports
// cannot overrun a limit.
//
// Counts have the meaning of the event stream's usage (docs/events.md):
// input without cache hits, output, cache reads, cache writes.
package meter

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// API is a model API the meter reads.
type API string

// The APIs, by the path of their call.
const (
	Anthropic API = "anthropic-messages"
	Responses API = "openai-responses"
	Chat      API = "openai-chat-completions"
)

// APIFor names the model API a request calls, by its path (any prefix, a
// gateway's /api/v1, say, and query allowed).
func APIFor(method, path string) (API, bool) {
	if method != http.MethodPost {
		return "", false
	}
	switch {
	case strings.HasSuffix(path, "/messages"):
		return Anthropic, true
	case strings.HasSuffix(path, "/responses"):
		return Responses, true
	case strings.HasSuffix(path, "/chat/completions"):
		return Chat, true
	}
	return "", false
}

// Usage is one call's or a run's token counts.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// Total is every token of u.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

func (u *Usage) add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheReadTokens += v.CacheReadTokens
	u.CacheWriteTokens += v.CacheWriteTokens
}

// Call is one metered model call.
type Call struct {
	API    API
	Model  string
	Stream bool
	Usage  Usage
	// Complete is false for a response that ended before its final usage
	// (a stream cut short): Usage is then what had been reported.
	Complete bool
}

// Meter records calls. It is safe for concurrent use.
type Meter struct {
	mu         sync.Mutex
	calls      []Call
	total      Usage
	unreadable int
	// OnCall, when set, receives each call and the run's total after it.
	OnCall func(c Call, total Usage)
	// OnUnreadable, when set, receives why each model call could not be
	// metered (see Unreadable).
	OnUnreadable func(why string)
}

// Unreadable records a model call whose answer could not be metered (it
// came in a content encoding the proxy cannot read, so the proxy refused
// to pass it on): the API spent tokens that no count holds. The meter
// fails closed: it says so through OnUnreadable instead of counting 0,
// and the runner ends a run with --max-tokens there, since its limit can
// no longer be held.
func (m *Meter) Unreadable(why string) {
	m.mu.Lock()
	m.unreadable++
	on := m.OnUnreadable
	m.mu.Unlock()
	if on != nil {
		on(why)
	}
}

// UnreadableCalls is how many model calls could not be metered.
func (m *Meter) UnreadableCalls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unreadable
}

// Calls are the calls recorded so far, in the order they ended.
func (m *Meter) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call{}, m.calls...)
}

// Total is the sum of every call so far.
func (m *Meter) Total() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

func (m *Meter) record(c Call) {
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.total.add(c.Usage)
	total, on := m.total, m.OnCall
	m.mu.Unlock()
	if on != nil {
		on(c, total)
	}
}

// Watch makes resp's body report the call's usage as it is read by the
// client; the body's bytes pass unchanged. Responses of other requests,
// and error responses, are left alone.
func (m *Meter) Watch(req *http.Request, resp *http.Response) {
	api, ok := APIFor(req.Method, req.URL.Path)
	if !ok || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return
	}
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var p parser
	if stream {
		p = newSSE(api)
	} else {
		p = &jsonBody{api: api}
	}
	resp.Body = &watched{ReadCloser: resp.Body, p: p, m: m, api: api, stream: stream}
}

// parser reads a response body as it passes.
type parser interface {
	feed(b []byte)
	// result is the call's usage and model, ok when any usage was seen,
	// complete when the final usage was.
	result() (u Usage, model string, ok, complete bool)
}

// watched passes a body through its parser and records the call once, at
// its end or when it is closed early.
type watched struct {
	io.ReadCloser
	p      parser
	m      *Meter
	api    API
	stream bool
	once   sync.Once
}

func (w *watched) Read(b []byte) (int, error) {
	n, err := w.ReadCloser.Read(b)
	if n > 0 {
		w.p.feed(b[:n])
	}
	if err != nil {
		w.done()
	}
	return n, err
}

func (w *watched) Close() error {
	w.done()
	return w.ReadCloser.Close()
}

func (w *watched) done() {
	w.once.Do(func() {
		u, model, ok, complete := w.p.result()
		if ok {
			w.m.record(Call{API: w.api, Model: model, Stream: w.stream, Usage: u, Complete: complete})
		}
	})
}
