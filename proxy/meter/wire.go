package meter

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// maxLine bounds one server-sent event line and a non-streamed body the
// meter keeps: a model's usage comes in small events, and a whole answer
// of the largest output the APIs allow is a few MiB. A line or body past
// it is not read, and the call counts as one the meter could not read
// (Unreadable): its usage may have been in it.
const maxLine = 8 << 20

// wireUsage is the usage object of any of the three APIs.
type wireUsage struct {
	// Anthropic Messages
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheReadTokens  *int64 `json:"cache_read_input_tokens"`
	CacheWriteTokens *int64 `json:"cache_creation_input_tokens"`
	// OpenAI Responses: input_tokens includes the cached part.
	InputDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	// Chat Completions: prompt_tokens includes the cached part.
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	PromptDetails    *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// unified converts a usage object of api into the event stream's meaning.
func (w *wireUsage) unified(api API) Usage {
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	switch api {
	case Responses:
		var cached int64
		if w.InputDetails != nil {
			cached = v(w.InputDetails.CachedTokens)
		}
		return Usage{InputTokens: max(v(w.InputTokens)-cached, 0), OutputTokens: v(w.OutputTokens), CacheReadTokens: cached}
	case Chat:
		var cached int64
		if w.PromptDetails != nil {
			cached = v(w.PromptDetails.CachedTokens)
		}
		return Usage{InputTokens: max(v(w.PromptTokens)-cached, 0), OutputTokens: v(w.CompletionTokens), CacheReadTokens: cached}
	}
	return Usage{InputTokens: v(w.InputTokens), OutputTokens: v(w.OutputTokens),
		CacheReadTokens: v(w.CacheReadTokens), CacheWriteTokens: v(w.CacheWriteTokens)}
}

// event is one JSON payload of any of the three APIs, streamed or not.
type event struct {
	Type  string     `json:"type"`
	Model string     `json:"model"`
	Usage *wireUsage `json:"usage"`
	// Anthropic message_start
	Message *struct {
		Model string     `json:"model"`
		Usage *wireUsage `json:"usage"`
	} `json:"message"`
	// OpenAI Responses response.completed (and .incomplete, .failed)
	Response *struct {
		Model string     `json:"model"`
		Usage *wireUsage `json:"usage"`
	} `json:"response"`
}

// state accumulates one call's usage from its events.
type state struct {
	api      API
	usage    Usage
	model    string
	seen     bool
	complete bool
}

func (s *state) result() (Usage, string, bool, bool) { return s.usage, s.model, s.seen, s.complete }

// apply reads one payload. final marks a whole (non-streamed) body.
func (s *state) apply(payload []byte, final bool) {
	var e event
	if json.Unmarshal(payload, &e) != nil {
		return
	}
	switch {
	case s.api == Anthropic && e.Type == "message_start" && e.Message != nil:
		s.model = e.Message.Model
		if e.Message.Usage != nil {
			s.usage, s.seen = e.Message.Usage.unified(Anthropic), true
		}
	case s.api == Anthropic && e.Type == "message_delta" && e.Usage != nil:
		// The delta's output is the call's total so far; input and cache
		// counts, when it repeats them, are final too.
		d := e.Usage
		if d.OutputTokens != nil {
			s.usage.OutputTokens = *d.OutputTokens
		}
		if d.InputTokens != nil {
			s.usage.InputTokens = *d.InputTokens
		}
		if d.CacheReadTokens != nil {
			s.usage.CacheReadTokens = *d.CacheReadTokens
		}
		if d.CacheWriteTokens != nil {
			s.usage.CacheWriteTokens = *d.CacheWriteTokens
		}
		s.seen, s.complete = true, true
	case s.api == Responses && e.Response != nil && e.Response.Usage != nil:
		s.model, s.usage, s.seen, s.complete = e.Response.Model, e.Response.Usage.unified(Responses), true, true
	case e.Usage != nil && (final || s.api == Chat):
		// A whole body of any API, or the usage chunk of a Chat stream.
		s.usage, s.seen, s.complete = e.Usage.unified(s.api), true, true
	}
	if s.model == "" && e.Model != "" {
		s.model = e.Model
	}
}

// sse parses a text/event-stream body line by line.
type sse struct {
	state
	line     []byte
	skipped  bool // the current line outgrew maxLine and is dropped
	overflow bool // some line did
	data     bool // a data line was read
	apiError bool // the first one was the API's error instead of a call
}

func newSSE(api API) *sse { return &sse{state: state{api: api}} }

// sofar is what the events so far reported: an Anthropic stream's input and
// cache tokens from its first event on.
func (p *sse) sofar() (Usage, bool) { return p.usage, p.seen }

func (p *sse) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.add(b)
			return
		}
		p.add(b[:i])
		p.endLine()
		b = b[i+1:]
	}
}

func (p *sse) add(b []byte) {
	if p.skipped || len(p.line)+len(b) > maxLine {
		p.skipped, p.overflow, p.line = true, true, p.line[:0]
		return
	}
	p.line = append(p.line, b...)
}

func (p *sse) endLine() {
	line := bytes.TrimSuffix(p.line, []byte("\r"))
	if !p.skipped {
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = bytes.TrimPrefix(data, []byte(" "))
			if !p.data {
				p.data, p.apiError = true, isError(data)
			}
			if len(data) > 0 && data[0] == '{' && hasUsage(data) {
				p.apply(data, false)
			}
		}
	}
	p.line, p.skipped = p.line[:0], false
}

// unread: a stream that had a line past maxLine (it may have held the
// usage), that ended without usage (unless the API answered with an error
// before anything else: an overloaded API's first event, no call made), or
// that ended before its final usage: cut short by the network, or by the
// agent closing it once it had read the text, the output it had generated
// by then is unknown.
func (p *sse) unread() string {
	switch {
	case p.overflow:
		return fmt.Sprintf("had a line over %d MiB, past what the meter reads", maxLine>>20)
	case !p.seen && !p.apiError:
		return "came without usage"
	case p.seen && !p.complete:
		return "ended before its final usage"
	}
	return ""
}

// isError reports whether an event is the API's error (Anthropic's and
// the Responses API's "type":"error", Chat Completions' "error" object).
func isError(data []byte) bool {
	var e struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil {
		return false
	}
	return e.Type == "error" || e.Type == "" && len(e.Error) > 0 && string(e.Error) != "null"
}

// hasUsage reports whether an event carries a usage object ("usage"
// followed by an object, not null): only those are decoded, so a stream's
// text deltas cost a scan, not a JSON decode.
func hasUsage(data []byte) bool {
	for rest := data; ; {
		i := bytes.Index(rest, []byte(`"usage"`))
		if i < 0 {
			return false
		}
		rest = bytes.TrimLeft(rest[i+len(`"usage"`):], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			if v := bytes.TrimLeft(rest[1:], " \t\r\n"); len(v) > 0 && v[0] == '{' {
				return true
			}
		}
	}
}

// jsonBody keeps a whole (non-streamed) body and reads it at the end.
type jsonBody struct {
	api  API
	buf  []byte
	over bool
	s    *state // the result, once read
}

func (p *jsonBody) feed(b []byte) {
	if p.over || len(p.buf)+len(b) > maxLine {
		p.over, p.buf = true, nil
		return
	}
	p.buf = append(p.buf, b...)
}

func (p *jsonBody) read() *state {
	if p.s == nil {
		p.s = &state{api: p.api}
		if !p.over {
			p.s.apply(p.buf, true)
		}
		p.buf = nil
	}
	return p.s
}

func (p *jsonBody) result() (Usage, string, bool, bool) { return p.read().result() }

// sofar: a whole body is read at its end only.
func (p *jsonBody) sofar() (Usage, bool) { return Usage{}, false }

// unread: a body past maxLine is not read at all (the usage of the
// three APIs comes at its end); a body without usage is not a call the
// meter can count.
func (p *jsonBody) unread() string {
	switch {
	case p.over:
		return fmt.Sprintf("was over %d MiB, past what the meter reads", maxLine>>20)
	case !p.read().seen:
		return "came without usage"
	}
	return ""
}
