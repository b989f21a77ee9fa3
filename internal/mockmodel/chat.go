package mockmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// chatRequest is the part of an OpenAI Chat Completions request that the
// mock reads.
type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or content parts
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string `json:"name"`
			Parameters struct {
				Required []string `json:"required"`
			} `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// conv reads the conversation: every assistant message is one reply of
// the script.
func (q *chatRequest) conv() *openAIConv {
	o := &openAIConv{}
	for _, t := range q.Tools {
		if t.Function.Name != "" {
			o.tools = append(o.tools, t.Function.Name)
			for _, r := range t.Function.Parameters.Required {
				if r == "description" {
					o.wantsDescription = append(o.wantsDescription, t.Function.Name)
				}
			}
		}
	}
	for _, m := range q.Messages {
		switch m.Role {
		case "assistant":
			o.steps++
		case "user":
			o.userTexts = append(o.userTexts, textParts(m.Content))
		case "tool":
			o.lastOutput = textParts(m.Content)
		}
	}
	return o
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, body []byte) {
	var q chatRequest
	if err := json.Unmarshal(body, &q); err != nil {
		s.logRequest(r, body, map[string]any{"error": err.Error()})
		badRequest(w, "mockmodel: bad JSON: "+err.Error(), nil)
		return
	}
	o := q.conv()
	withUsage := q.StreamOptions != nil && q.StreamOptions.IncludeUsage
	s.serveOpenAI(w, r, body, APIChat, q.Model, q.Stream, o, func(ctx context.Context, rep *reply, reasoning int64, id ids) bool {
		f, _ := w.(http.Flusher)
		ok := rep.streamChat(ctx, &chatWriter{w: w, f: f}, q.Model, id, o, reasoning, withUsage, s.opts)
		if !withUsage {
			// Without stream_options.include_usage no usage is served.
			rep.Usage = Usage{}
		}
		return ok
	}, func(rep *reply, reasoning int64, id ids) obj {
		return rep.wholeChat(q.Model, id, o, reasoning)
	})
}

// wholeChat is the reply as one chat.completion object: the message with
// its text, reasoning and tool calls, and the usage.
func (r *reply) wholeChat(model string, id ids, o *openAIConv, reasoning int64) obj {
	var text, thinking string
	var calls []any
	for i, b := range r.Blocks {
		switch b.Type {
		case "thinking":
			thinking += b.Text
		case "text":
			text += b.Text
		case "tool_use":
			name, args := shellCall(b, o)
			calls = append(calls, obj{{"id", id.tool(i)}, {"type", "function"}, {"function", obj{{"name", name}, {"arguments", args}}}})
		}
	}
	msg := obj{{"role", "assistant"}, {"content", text}, {"refusal", nil}}
	if thinking != "" {
		msg = append(msg, kv{"reasoning_content", thinking})
	}
	finish := "stop"
	if len(calls) > 0 {
		msg, finish = append(msg, kv{"tool_calls", calls}), "tool_calls"
	}
	return obj{{"id", id.msg}, {"object", "chat.completion"}, {"created", mockCreated}, {"model", model}, {"system_fingerprint", "fp_mock"},
		{"choices", []any{obj{{"index", 0}, {"message", msg}, {"logprobs", nil}, {"finish_reason", finish}}}},
		{"usage", chatUsage(r.Usage, reasoning)}}
}

// chatUsage is a Chat Completions usage object: prompt_tokens includes the
// cached tokens, completion_tokens the reasoning tokens.
func chatUsage(u Usage, reasoning int64) obj {
	return obj{
		{"prompt_tokens", u.InputTokens + u.CacheReadTokens},
		{"completion_tokens", u.OutputTokens},
		{"total_tokens", u.InputTokens + u.CacheReadTokens + u.OutputTokens},
		{"prompt_tokens_details", obj{{"cached_tokens", u.CacheReadTokens}, {"audio_tokens", 0}}},
		{"completion_tokens_details", obj{{"reasoning_tokens", reasoning}, {"audio_tokens", 0},
			{"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}},
	}
}

// streamChat writes the reply as Chat Completions chunks: the role, the
// reasoning as reasoning_content deltas (the field OpenAI-compatible
// servers use), the text, the tool calls with their arguments in pieces,
// the finish reason, the usage chunk when asked for, and [DONE].
func (r *reply) streamChat(ctx context.Context, d *chatWriter, model string, id ids, o *openAIConv, reasoning int64, withUsage bool, opts Options) bool {
	chunk := func(fields ...kv) obj {
		return append(obj{{"id", id.msg}, {"object", "chat.completion.chunk"}, {"created", mockCreated}, {"model", model},
			{"system_fingerprint", "fp_mock"}}, fields...)
	}
	choice := func(delta obj, finish any) {
		d.write(chunk(kv{"choices", []any{obj{{"index", 0}, {"delta", delta}, {"logprobs", nil}, {"finish_reason", finish}}}}))
	}
	choice(obj{{"role", "assistant"}, {"content", ""}, {"refusal", nil}}, nil)
	calls := 0
	for i, b := range r.Blocks {
		switch b.Type {
		case "thinking":
			for _, p := range splitFragments(b.Text, 2) {
				choice(obj{{"reasoning_content", p}}, nil)
			}
		case "text":
			if r.Slow {
				if !slowDeltas(ctx, r.SlowChunk, opts.SlowInterval, opts.SlowMax, func(c string) error {
					choice(obj{{"content", c}}, nil)
					return d.err
				}) {
					return false
				}
				continue
			}
			for _, p := range splitFragments(b.Text, 3) {
				choice(obj{{"content", p}}, nil)
			}
		case "tool_use":
			name, args := shellCall(b, o)
			choice(obj{{"tool_calls", []any{obj{{"index", calls}, {"id", id.tool(i)}, {"type", "function"},
				{"function", obj{{"name", name}, {"arguments", ""}}}}}}}, nil)
			for _, p := range splitFragments(args, 3) {
				choice(obj{{"tool_calls", []any{obj{{"index", calls}, {"function", obj{{"arguments", p}}}}}}}, nil)
			}
			calls++
		}
	}
	finish := "stop"
	if calls > 0 {
		finish = "tool_calls"
	}
	choice(obj{}, finish)
	if withUsage {
		d.write(chunk(kv{"choices", []any{}}, kv{"usage", chatUsage(r.Usage, reasoning)}))
	}
	d.line("[DONE]")
	return d.err == nil && ctx.Err() == nil
}

// chatWriter writes Chat Completions chunks as "data: JSON" Server-Sent
// Events (no event names), flushed after each.
type chatWriter struct {
	w   http.ResponseWriter
	f   http.Flusher
	err error
}

func (c *chatWriter) write(data obj) {
	payload, err := marshal(data)
	if err != nil {
		c.err = err
		return
	}
	c.line(string(payload))
}

func (c *chatWriter) line(data string) {
	if c.err != nil {
		return
	}
	if _, c.err = fmt.Fprintf(c.w, "data: %s\n\n", data); c.err == nil && c.f != nil {
		c.f.Flush()
	}
}
