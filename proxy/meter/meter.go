// Package meter counts the tokens of every model call that passes through
// the filter proxy to a credential host, from the usage the model API
// itself reports in its responses (Anthropic Messages, OpenAI Responses and
// Chat Completions; streamed and not), independent of what the agent's CLI
// prints. The runner compares the metered totals with the adapter's
// end.usage and enforces --max-tokens with them, so a CLI that under-reports
// cannot overrun a limit.
//
// It fails closed: a call whose tokens it cannot count (Classify's Unknown,
// or a model call whose answer holds no usage it can read) is reported as
// unreadable rather than counted as nothing, and with --max-tokens the
// proxy refuses the Unknown ones before they go upstream.
//
// Counts have the meaning of the event stream's usage (docs/events.md):
// input without cache hits, output, cache reads, cache writes.
package meter

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// API is a model API the meter reads.
type API string

// The APIs, by the path of their call (see Classify).
const (
	Anthropic API = "anthropic-messages"
	Responses API = "openai-responses"
	Chat      API = "openai-chat-completions"
)

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

func (u *Usage) sub(v Usage) {
	u.InputTokens -= v.InputTokens
	u.OutputTokens -= v.OutputTokens
	u.CacheReadTokens -= v.CacheReadTokens
	u.CacheWriteTokens -= v.CacheWriteTokens
}

// Call is one metered model call.
type Call struct {
	API    API
	Model  string
	Stream bool
	Usage  Usage
	// Complete is false for a response that ended before its final usage
	// (a stream cut short): Usage is then what had been reported, and the
	// call is also unreadable (its output is unknown).
	Complete bool
}

// Meter records calls. It is safe for concurrent use.
type Meter struct {
	mu         sync.Mutex
	calls      []Call
	total      Usage
	unreadable int
	// reported is what the calls still under way have reported so far
	// (an Anthropic stream's input and cache tokens come in its first
	// event, its output at its end).
	reported Usage
	// OnCall, when set, receives each call and the run's total after it.
	OnCall func(c Call, total Usage)
	// OnReported, when set, receives the run's total with what the calls
	// still under way have reported, each time a call's answer reports
	// more: a limit held against it does not wait for the answers to end
	// (an agent that stops reading one keeps it under way).
	OnReported func(total Usage)
	// OnUnreadable, when set, receives why each model call could not be
	// metered (see Unreadable).
	OnUnreadable func(why string)
	// ReadAhead reads an answer without streaming whole before the client
	// gets a byte of it (readAhead), so that it counts whether or not the
	// client reads it. The runner sets it with --max-tokens: it holds the
	// answer's headers back until its end, which a limit is worth.
	ReadAhead bool
}

// Unreadable records a call whose tokens the meter could not count: an
// answer in a content encoding the proxy cannot read (it refused to pass
// it on), a model call answered without usage or with more than the meter
// reads (maxLine), a successful call of a kind the meter does not read
// (Classify's Unknown, which the proxy lets through without --max-tokens).
// The API may have spent tokens that no count holds. The meter fails
// closed: it says so through OnUnreadable instead of counting 0, and the
// runner ends a run with --max-tokens there, since its limit can no
// longer be held.
func (m *Meter) Unreadable(why string) {
	m.mu.Lock()
	m.unreadable++
	on := m.OnUnreadable
	m.mu.Unlock()
	if on != nil {
		on(why)
	}
}

// UnreadableCalls is how many calls could not be metered.
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

// Reported is the run's total with what the calls still under way have
// reported so far.
func (m *Meter) Reported() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.total
	t.add(m.reported)
	return t
}

// report moves a call under way from having reported was to now.
func (m *Meter) report(was, now Usage) {
	m.mu.Lock()
	m.reported.sub(was)
	m.reported.add(now)
	t, on := m.total, m.OnReported
	t.add(m.reported)
	m.mu.Unlock()
	if on != nil {
		on(t)
	}
}

// record adds a call that ended, which had reported so far while under way.
func (m *Meter) record(c Call, so Usage) {
	m.mu.Lock()
	m.reported.sub(so)
	m.calls = append(m.calls, c)
	m.total.add(c.Usage)
	total, on := m.total, m.OnCall
	m.mu.Unlock()
	if on != nil {
		on(c, total)
	}
}

// Watch makes resp's body report the call's usage as the client reads it,
// or, for an answer without streaming with ReadAhead, here, read whole
// before the client gets it (readAhead); the body's bytes pass unchanged.
// Only successful answers (2xx) are counted: of a model call from its
// usage, at the end of the body (and what a stream reports before, see
// Reported); of a call the meter cannot read (Classify's Unknown) as
// unreadable at once. Free calls and error answers are left alone.
func (m *Meter) Watch(req *http.Request, resp *http.Response) {
	if resp.StatusCode/100 != 2 {
		return
	}
	api, kind := Classify(req.Method, req.URL)
	switch kind {
	case Free:
		return
	case Unknown:
		m.Unreadable(fmt.Sprintf("%s answered %d, and the meter cannot tell what such a call costs", Describe(req), resp.StatusCode))
		return
	}
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	body := resp.Body
	if body == nil {
		body = http.NoBody
	}
	if stream {
		resp.Body = &watched{ReadCloser: body, p: newSSE(api), m: m, api: api, stream: true, call: Describe(req)}
		return
	}
	whole := &jsonBody{api: api}
	w := &watched{ReadCloser: body, p: whole, m: m, api: api, call: Describe(req)}
	if m.ReadAhead {
		resp.Body = readAhead(w, whole)
		return
	}
	resp.Body = w
}

// readAhead reads a whole (non-streamed) answer before the client gets a
// byte of it and records the call, so that it is counted whether or not
// the client reads it: its usage comes at its end, which an agent could
// otherwise hold off by not reading a large answer. The answer is held
// once, up to maxLine, for the parser and then for the client; one larger
// counts as unreadable at once and passes as it comes.
func readAhead(w *watched, whole *jsonBody) io.ReadCloser {
	data, err := io.ReadAll(io.LimitReader(w.ReadCloser, maxLine+1))
	if len(data) > maxLine {
		whole.over = true
		w.done()
		return readCloser{io.MultiReader(bytes.NewReader(data), w.ReadCloser), w}
	}
	whole.buf = data // read (and let go of) by done's result
	w.done()
	if err == nil {
		return readCloser{bytes.NewReader(data), w}
	}
	// Cut short (recorded as such): the client reads what came, then the
	// same error.
	return readCloser{io.MultiReader(bytes.NewReader(data), errReader{err}), w}
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// maxShownPath bounds the path Describe shows: it is the agent's.
const maxShownPath = 100

// Describe names a request for a warning or a detail: its method (an
// HTTP token), its path quoted (the agent chose it: no control character
// passes), cut to maxShownPath bytes, and its destination.
func Describe(req *http.Request) string {
	p := req.URL.EscapedPath()
	if len(p) > maxShownPath {
		p = p[:maxShownPath] + "..."
	}
	return fmt.Sprintf("%.16s %s to %s", req.Method, strconv.Quote(p), req.URL.Host)
}

// parser reads a response body as it passes.
type parser interface {
	feed(b []byte)
	// result is the call's usage and model, ok when any usage was seen,
	// complete when the final usage was; it is read at the end.
	result() (u Usage, model string, ok, complete bool)
	// sofar is the usage the answer has reported before its end, ok when
	// any.
	sofar() (u Usage, ok bool)
	// unread says why the call's tokens are not all known ("" when they
	// are): no usage, or a line or body past maxLine, which may have held
	// it.
	unread() string
}

// watched passes a body through its parser, tells the meter what the call
// has reported as it comes, and records the call once, at its end or when
// it is closed early.
type watched struct {
	io.ReadCloser
	p      parser
	m      *Meter
	api    API
	stream bool
	call   string // Describe's
	mu     sync.Mutex
	so     Usage // what the meter was told so far
	ended  bool
	once   sync.Once
}

func (w *watched) Read(b []byte) (int, error) {
	n, err := w.ReadCloser.Read(b)
	if n > 0 {
		w.feed(b[:n])
	}
	if err != nil {
		w.done()
	}
	return n, err
}

func (w *watched) feed(b []byte) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.p.feed(b)
	was := w.so
	u, ok := w.p.sofar()
	if ok {
		w.so = u
	}
	w.mu.Unlock()
	// Told outside the lock: OnReported may do anything, even close this
	// body (OnCall and OnUnreadable run inside done's once, and must not).
	// A record (done) between the two moves the same amounts in the other
	// order: the count is low for a moment, never high.
	if ok && u != was {
		w.m.report(was, u)
	}
}

func (w *watched) Close() error {
	w.done()
	return w.ReadCloser.Close()
}

func (w *watched) done() {
	w.once.Do(func() {
		w.mu.Lock()
		w.ended = true
		so := w.so
		w.mu.Unlock()
		u, model, ok, complete := w.p.result()
		if ok {
			w.m.record(Call{API: w.api, Model: model, Stream: w.stream, Usage: u, Complete: complete}, so)
		}
		if why := w.p.unread(); why != "" {
			w.m.Unreadable(fmt.Sprintf("the answer of %s %s, so its tokens are unknown", w.call, why))
		}
	})
}
