package mockmodel

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Usage is the token usage of one served model call, as the final values that
// the mock sent (message_delta for streams, the message body otherwise).
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_input_tokens"`
	CacheWriteTokens int64 `json:"cache_creation_input_tokens"`
}

// block is one content block of a scripted reply.
type block struct {
	Type      string // "thinking", "text" or "tool_use"
	Text      string // text or thinking text
	ToolName  string // tool_use only
	ToolInput obj    // tool_use only
	// Flagged, for a tool_use, makes the server-side auto-mode safety check
	// (safeguard_results) judge the call dangerous with this explanation.
	Flagged string
}

// reply is what the mock answers to one model call.
type reply struct {
	Blocks       []block
	StopReason   string // "end_turn", "tool_use", "stop_sequence"; derived when empty
	StopSequence string // the matched stop sequence for "stop_sequence"
	Usage        Usage

	// Status != 0 and != 200 makes an error reply with an Anthropic error body.
	Status  int
	ErrType string
	ErrMsg  string

	// Slow streams the text block as one SlowChunk every interval until the
	// maximum has passed or the client went away.
	Slow      bool
	SlowChunk string

	// Safeguards adds safeguard_results (the verdict of the server-side
	// auto-mode safety check) for every tool_use block.
	Safeguards bool

	// delay is waited before answering.
	delay time.Duration
	// cut ends the stream after message_start (Options.CutStreams and
	// EndStreamsEarly).
	cut bool
}

func (r *reply) stopReason() string {
	if r.StopReason != "" {
		return r.StopReason
	}
	for _, b := range r.Blocks {
		if b.Type == "tool_use" {
			return "tool_use"
		}
	}
	return "end_turn"
}

func (r *reply) stopSequence() any {
	if r.StopSequence == "" {
		return nil
	}
	return r.StopSequence
}

// kv and obj build JSON objects whose keys keep their order, so the mock's
// output reads like the real API's.
type kv struct {
	K string
	V any
}

type obj []kv

// MarshalJSON implements json.Marshaler.
func (o obj) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, p := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := marshal(p.K)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		v, err := marshal(p.V)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping (the API does not escape <, >, &).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func usageObj(u Usage, output int64) obj {
	return obj{
		{"input_tokens", u.InputTokens},
		{"cache_creation_input_tokens", u.CacheWriteTokens},
		{"cache_read_input_tokens", u.CacheReadTokens},
		{"cache_creation", obj{{"ephemeral_5m_input_tokens", 0}, {"ephemeral_1h_input_tokens", u.CacheWriteTokens}}},
		{"output_tokens", output},
		{"service_tier", "standard"},
	}
}

// finalUsageObj is the cumulative usage of message_delta.
func finalUsageObj(u Usage) obj {
	return obj{
		{"input_tokens", u.InputTokens},
		{"cache_creation_input_tokens", u.CacheWriteTokens},
		{"cache_read_input_tokens", u.CacheReadTokens},
		{"output_tokens", u.OutputTokens},
	}
}

func signature(s string) string {
	return base64.StdEncoding.EncodeToString([]byte("mocksig:" + s))
}

// ids names the message and tool calls of one reply.
type ids struct {
	msg  string
	tool func(i int) string
}

func (b block) input() obj {
	if b.ToolInput == nil {
		return obj{}
	}
	return b.ToolInput
}

func (b block) inputJSON() string {
	data, _ := marshal(b.input())
	return string(data)
}

// fullContent renders the reply's blocks as complete content blocks.
func (r *reply) fullContent(id ids) []any {
	out := []any{}
	for i, b := range r.Blocks {
		switch b.Type {
		case "thinking":
			out = append(out, obj{{"type", "thinking"}, {"thinking", b.Text}, {"signature", signature(b.Text)}})
		case "text":
			out = append(out, obj{{"type", "text"}, {"text", b.Text}})
		case "tool_use":
			out = append(out, obj{{"type", "tool_use"}, {"id", id.tool(i)}, {"name", b.ToolName}, {"input", b.input()}})
		}
	}
	return out
}

// safeguardResults is the verdict of the server-side auto-mode safety check
// (the "dangerous_tool_use" safeguard) for each tool call of the reply, or nil.
func (r *reply) safeguardResults(id ids) []any {
	if !r.Safeguards {
		return nil
	}
	uses := obj{}
	for i, b := range r.Blocks {
		if b.Type != "tool_use" {
			continue
		}
		v := obj{{"type", "evaluated"}, {"outcome", "not_flagged"}}
		if b.Flagged != "" {
			v = obj{{"type", "evaluated"}, {"outcome", "flagged"}, {"explanation", b.Flagged}}
		}
		uses = append(uses, kv{id.tool(i), v})
	}
	if len(uses) == 0 {
		return nil
	}
	return []any{obj{{"type", "dangerous_tool_use"}, {"status", obj{{"type", "available"}, {"tool_uses", uses}}}}}
}

func (r *reply) message(model string, id ids) obj {
	m := obj{
		{"model", model},
		{"id", id.msg},
		{"type", "message"},
		{"role", "assistant"},
		{"content", r.fullContent(id)},
		{"stop_reason", r.stopReason()},
		{"stop_sequence", r.stopSequence()},
		{"usage", usageObj(r.Usage, r.Usage.OutputTokens)},
	}
	if sg := r.safeguardResults(id); sg != nil {
		m = append(m, kv{"safeguard_results", sg})
	}
	return m
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	data, _ := marshal(v)
	_, _ = w.Write(data)
}

func errorBody(errType, msg, reqID string) obj {
	return obj{
		{"type", "error"},
		{"error", obj{{"type", errType}, {"message", msg}}},
		{"request_id", reqID},
	}
}

// sseWriter writes Server-Sent Events the way the Anthropic API frames them:
// "event: NAME\ndata: JSON\n\n", flushed after each event.
type sseWriter struct {
	w   http.ResponseWriter
	f   http.Flusher
	err error
}

// event writes one event; data holds the fields after "type".
func (s *sseWriter) event(name string, data obj) {
	if s.err != nil {
		return
	}
	payload, err := marshal(append(obj{{"type", name}}, data...))
	if err != nil {
		s.err = err
		return
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, payload); err != nil {
		s.err = err
		return
	}
	if s.f != nil {
		s.f.Flush()
	}
}

// splitFragments cuts s into up to n roughly equal pieces (whole runes).
func splitFragments(s string, n int) []string {
	rs := []rune(s)
	if len(rs) == 0 {
		return nil
	}
	n = min(n, len(rs))
	size := (len(rs) + n - 1) / n
	var out []string
	for i := 0; i < len(rs); i += size {
		out = append(out, string(rs[i:min(i+size, len(rs))]))
	}
	return out
}

func delta(i int, d obj) obj { return obj{{"index", i}, {"delta", d}} }

// stream writes the reply as an SSE stream. It returns the usage as served
// (the message_start usage, output_tokens 1, if the final message_delta was
// never written) and whether the stream was complete (message_stop written
// and the client still there).
func (r *reply) stream(ctx context.Context, w http.ResponseWriter, model string, id ids, slowEvery, slowMax time.Duration) (Usage, bool) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	s := &sseWriter{w: w, f: f}

	s.event("message_start", obj{{"message", obj{
		{"model", model},
		{"id", id.msg},
		{"type", "message"},
		{"role", "assistant"},
		{"content", []any{}},
		{"stop_reason", nil},
		{"stop_sequence", nil},
		{"usage", usageObj(r.Usage, 1)},
	}}})
	s.event("ping", nil)
	served := r.Usage
	served.OutputTokens = 1
	if r.cut {
		return served, false
	}

	for i, b := range r.Blocks {
		switch b.Type {
		case "thinking":
			s.event("content_block_start", obj{{"index", i}, {"content_block", obj{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}})
			for _, part := range splitFragments(b.Text, 2) {
				s.event("content_block_delta", delta(i, obj{{"type", "thinking_delta"}, {"thinking", part}}))
			}
			s.event("content_block_delta", delta(i, obj{{"type", "signature_delta"}, {"signature", signature(b.Text)}}))
		case "text":
			s.event("content_block_start", obj{{"index", i}, {"content_block", obj{{"type", "text"}, {"text", ""}}}})
			if r.Slow {
				if !r.slowText(ctx, s, i, slowEvery, slowMax) {
					return served, false
				}
			} else {
				for _, part := range splitFragments(b.Text, 3) {
					s.event("content_block_delta", delta(i, obj{{"type", "text_delta"}, {"text", part}}))
				}
			}
		case "tool_use":
			s.event("content_block_start", obj{{"index", i}, {"content_block", obj{{"type", "tool_use"}, {"id", id.tool(i)}, {"name", b.ToolName}, {"input", obj{}}}}})
			// Like the API: an empty first fragment, then the JSON in pieces.
			for _, part := range append([]string{""}, splitFragments(b.inputJSON(), 3)...) {
				s.event("content_block_delta", delta(i, obj{{"type", "input_json_delta"}, {"partial_json", part}}))
			}
		}
		s.event("content_block_stop", obj{{"index", i}})
	}
	d := obj{{"stop_reason", r.stopReason()}, {"stop_sequence", r.stopSequence()}}
	if sg := r.safeguardResults(id); sg != nil {
		d = append(d, kv{"safeguard_results", sg})
	}
	s.event("message_delta", obj{{"delta", d}, {"usage", finalUsageObj(r.Usage)}})
	if s.err == nil {
		served = r.Usage
	}
	s.event("message_stop", nil)
	return served, s.err == nil && ctx.Err() == nil
}

// slowText sends one small text delta every interval until max has passed or
// the client went away (false).
func (r *reply) slowText(ctx context.Context, s *sseWriter, index int, every, max time.Duration) bool {
	deadline := time.Now().Add(max)
	t := time.NewTicker(every)
	defer t.Stop()
	chunk := r.SlowChunk
	if chunk == "" {
		chunk = "tick "
	}
	for {
		s.event("content_block_delta", delta(index, obj{{"type", "text_delta"}, {"text", chunk}}))
		if s.err != nil {
			return false
		}
		if !time.Now().Add(every).Before(deadline) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
