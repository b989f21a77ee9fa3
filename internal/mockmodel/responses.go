package mockmodel

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// responsesRequest is the part of an OpenAI Responses API request that the
// mock reads.
type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"` // a string or a list of items
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

// responsesItem is one item of a Responses request's input.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"` // a function_call_output's
}

// fromModel reports whether an input item is something a model reply
// produced (a message of the assistant, reasoning, a tool call) rather than
// input (a user, developer or system message, a tool's output).
func (it responsesItem) fromModel() bool {
	if it.Type == "message" || (it.Type == "" && it.Role != "") {
		return it.Role == "assistant"
	}
	return !strings.HasSuffix(it.Type, "_output")
}

// conv reads the conversation. Its steps are the runs of items a model
// produced: one reply can hold reasoning, a message and several tool calls,
// and the tools' outputs follow the run.
func (q *responsesRequest) conv() *openAIConv {
	o := &openAIConv{}
	for _, t := range q.Tools {
		if t.Name != "" {
			o.tools = append(o.tools, t.Name)
		}
	}
	in := strings.TrimSpace(string(q.Input))
	if strings.HasPrefix(in, `"`) {
		o.userTexts = append(o.userTexts, textParts(q.Input))
		return o
	}
	var items []responsesItem
	_ = json.Unmarshal(q.Input, &items)
	inRun := false
	for _, it := range items {
		if it.fromModel() {
			if !inRun {
				o.steps++
			}
			inRun = true
			continue
		}
		inRun = false
		if it.Role == "user" {
			o.userTexts = append(o.userTexts, textParts(it.Content))
		}
		if strings.HasSuffix(it.Type, "_output") {
			o.lastOutput = textParts(it.Output)
		}
	}
	return o
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request, body []byte) {
	var q responsesRequest
	if err := json.Unmarshal(body, &q); err != nil {
		s.logRequest(r, body, map[string]any{"error": err.Error()})
		badRequest(w, "mockmodel: bad JSON: "+err.Error(), nil)
		return
	}
	o := q.conv()
	s.serveOpenAI(w, r, body, APIResponses, q.Model, q.Stream, o, func(ctx context.Context, rep *reply, reasoning int64, id ids) bool {
		f, _ := w.(http.Flusher)
		return rep.streamResponses(ctx, &sseWriter{w: w, f: f}, q.Model, id, o, reasoning, s.opts)
	}, func(rep *reply, reasoning int64, id ids) obj {
		return rep.wholeResponse(q.Model, id, o, reasoning)
	})
}

// wholeResponse is the reply as one Responses API response object: the
// output items the stream would end with, and the usage.
func (r *reply) wholeResponse(model string, id ids, o *openAIConv, reasoning int64) obj {
	suffix := strings.TrimPrefix(id.msg, "resp_")
	output := []any{}
	for i, b := range r.Blocks {
		switch b.Type {
		case "thinking":
			output = append(output, reasoningItem("rs_"+suffix+"_"+strconv.Itoa(i), b.Text))
		case "text":
			output = append(output, messageItem("msg_"+suffix+"_"+strconv.Itoa(i), b.Text))
		case "tool_use":
			name, args := shellCall(b, o)
			output = append(output, functionCallItem("fc_"+suffix+"_"+strconv.Itoa(i), id.tool(i), name, "completed", args))
		}
	}
	return responseObject(id.msg, model, "completed", output, responsesUsage(r.Usage, reasoning))
}

// responseObject is a Responses API response.
func responseObject(id, model, status string, output []any, usage any) obj {
	return obj{{"id", id}, {"object", "response"}, {"created_at", mockCreated}, {"status", status},
		{"error", nil}, {"model", model}, {"output", output}, {"parallel_tool_calls", true}, {"usage", usage}}
}

func reasoningItem(id, text string) obj {
	return obj{{"id", id}, {"type", "reasoning"}, {"summary", []any{obj{{"type", "summary_text"}, {"text", text}}}}}
}

func messageItem(id, text string) obj {
	content := obj{{"type", "output_text"}, {"annotations", []any{}}, {"text", text}}
	return obj{{"id", id}, {"type", "message"}, {"status", "completed"}, {"content", []any{content}}, {"role", "assistant"}}
}

func functionCallItem(id, callID, name, status, args string) obj {
	return obj{{"id", id}, {"type", "function_call"}, {"status", status}, {"arguments", args}, {"call_id", callID}, {"name", name}}
}

// responsesUsage is a Responses API usage object: input_tokens includes the
// cached tokens.
func responsesUsage(u Usage, reasoning int64) obj {
	return obj{
		{"input_tokens", u.InputTokens + u.CacheReadTokens},
		{"input_tokens_details", obj{{"cached_tokens", u.CacheReadTokens}}},
		{"output_tokens", u.OutputTokens},
		{"output_tokens_details", obj{{"reasoning_tokens", reasoning}}},
		{"total_tokens", u.InputTokens + u.CacheReadTokens + u.OutputTokens},
	}
}

// streamResponses writes the reply as a Responses API event stream:
// response.created, one output item per block (reasoning with a summary,
// a message with output_text, a function_call), response.completed with
// the usage. It returns whether the stream was complete.
func (r *reply) streamResponses(ctx context.Context, d *sseWriter, model string, id ids, o *openAIConv, reasoning int64, opts Options) bool {
	seq := 0
	ev := func(name string, fields obj) {
		d.event(name, append(obj{{"sequence_number", seq}}, fields...))
		seq++
	}
	response := func(status string, output []any, usage any) obj {
		return responseObject(id.msg, model, status, output, usage)
	}
	ev("response.created", obj{{"response", response("in_progress", []any{}, nil)}})
	ev("response.in_progress", obj{{"response", response("in_progress", []any{}, nil)}})
	suffix := strings.TrimPrefix(id.msg, "resp_")
	output := []any{}
	for i, b := range r.Blocks {
		at := obj{{"output_index", i}}
		switch b.Type {
		case "thinking":
			itemID := "rs_" + suffix + "_" + strconv.Itoa(i)
			ev("response.output_item.added", append(at, kv{"item", obj{{"id", itemID}, {"type", "reasoning"}, {"summary", []any{}}}}))
			part := obj{{"item_id", itemID}, {"output_index", i}, {"summary_index", 0}}
			ev("response.reasoning_summary_part.added", append(part, kv{"part", obj{{"type", "summary_text"}, {"text", ""}}}))
			for _, p := range splitFragments(b.Text, 2) {
				ev("response.reasoning_summary_text.delta", append(part, kv{"delta", p}))
			}
			ev("response.reasoning_summary_text.done", append(part, kv{"text", b.Text}))
			ev("response.reasoning_summary_part.done", append(part, kv{"part", obj{{"type", "summary_text"}, {"text", b.Text}}}))
			item := reasoningItem(itemID, b.Text)
			ev("response.output_item.done", append(at, kv{"item", item}))
			output = append(output, item)
		case "text":
			itemID := "msg_" + suffix + "_" + strconv.Itoa(i)
			ev("response.output_item.added", append(at, kv{"item", obj{{"id", itemID}, {"type", "message"}, {"status", "in_progress"},
				{"content", []any{}}, {"role", "assistant"}}}))
			part := obj{{"item_id", itemID}, {"output_index", i}, {"content_index", 0}}
			ev("response.content_part.added", append(part, kv{"part", obj{{"type", "output_text"}, {"annotations", []any{}}, {"text", ""}}}))
			text := b.Text
			if r.Slow {
				var sb strings.Builder
				if !slowDeltas(ctx, r.SlowChunk, opts.SlowInterval, opts.SlowMax, func(c string) error {
					sb.WriteString(c)
					ev("response.output_text.delta", append(part, kv{"delta", c}))
					return d.err
				}) {
					return false
				}
				text = sb.String()
			} else {
				for _, p := range splitFragments(text, 3) {
					ev("response.output_text.delta", append(part, kv{"delta", p}))
				}
			}
			content := obj{{"type", "output_text"}, {"annotations", []any{}}, {"text", text}}
			ev("response.output_text.done", append(part, kv{"text", text}))
			ev("response.content_part.done", append(part, kv{"part", content}))
			item := messageItem(itemID, text)
			ev("response.output_item.done", append(at, kv{"item", item}))
			output = append(output, item)
		case "tool_use":
			name, args := shellCall(b, o)
			itemID := "fc_" + suffix + "_" + strconv.Itoa(i)
			call := func(status, args string) obj { return functionCallItem(itemID, id.tool(i), name, status, args) }
			ev("response.output_item.added", append(at, kv{"item", call("in_progress", "")}))
			for _, p := range splitFragments(args, 3) {
				ev("response.function_call_arguments.delta", obj{{"item_id", itemID}, {"output_index", i}, {"delta", p}})
			}
			ev("response.function_call_arguments.done", obj{{"item_id", itemID}, {"output_index", i}, {"arguments", args}})
			ev("response.output_item.done", append(at, kv{"item", call("completed", args)}))
			output = append(output, call("completed", args))
		}
	}
	ev("response.completed", obj{{"response", response("completed", output, responsesUsage(r.Usage, reasoning))}})
	return d.err == nil && ctx.Err() == nil
}
