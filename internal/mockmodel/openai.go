package mockmodel

// The OpenAI side of the mock: the Responses API with streaming (what codex
// calls, POST /v1/responses) and Chat Completions with streaming (what pi
// calls through its "openai-completions" provider, POST
// /v1/chat/completions). The scenarios are the Anthropic ones (mainReply);
// only the wire format and the shell tool differ. A Bash block of a script
// becomes a call of the shell tool the request offers: exec_command {cmd}
// for codex, bash {command} for pi (dsh, whose bash requires a description
// too, gets the script's one).
//
// Usage: OpenAI's input token counts INCLUDE the cached part
// (input_tokens_details.cached_tokens, prompt_tokens_details.cached_tokens),
// Anthropic's exclude it. The ledger keeps the meaning of docs/events.md:
// Usage.InputTokens is the input without cache hits, Usage.CacheReadTokens
// the cached part, and there is no cache write. Every call has a non-zero
// cached part, so a runtime or adapter that forgets the conversion shows.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// mockCreated is the creation time the OpenAI replies carry (2026-01-01),
// fixed so that replies depend on the conversation only.
const mockCreated = 1767225600

// APIs of a served call (Call.API); "" is the Anthropic Messages API.
const (
	APIResponses = "responses"
	APIChat      = "chat"
)

// openAIUsage is the usage of step k of an OpenAI conversation, in the
// unified meaning; reasoning is the part of the output spent on reasoning
// when the reply has some.
func openAIUsage(role string, k int) (u Usage, reasoning int64) {
	if role == RoleMain {
		return Usage{InputTokens: int64(200 + 10*k), CacheReadTokens: int64(1000 * (k + 1)), OutputTokens: int64(30 + 5*k)}, 7
	}
	return Usage{InputTokens: 300, CacheReadTokens: 100, OutputTokens: 6}, 0
}

// openAIConv is what the mock reads from an OpenAI request, whichever API.
type openAIConv struct {
	userTexts []string // the text of each user message, in order
	steps     int      // model replies already in the conversation
	tools     []string // names of the function tools offered
	// wantsDescription names the offered tools whose parameters require a
	// "description" (dsh's bash: command and description).
	wantsDescription []string
	lastOutput       string // the latest tool output in the conversation
}

// promptText is the first user text with a scenario marker (codex sends
// its environment context before the prompt).
func (o *openAIConv) promptText() string {
	for _, t := range o.userTexts {
		if sc, _ := markers(t); sc != "" {
			return t
		}
	}
	return ""
}

func (o *openAIConv) hasTool(name string) bool {
	for _, t := range o.tools {
		if t == name {
			return true
		}
	}
	return false
}

// classify finds the scenario: the first marker in a user message (codex
// sends its environment context as a user message before the prompt). A
// request without tools, or without a marker, is a side call (a title, a
// summary). Subagents are not scripted for these APIs.
func (o *openAIConv) classify() conv {
	if len(o.tools) > 0 {
		for _, t := range o.userTexts {
			if sc, _ := markers(t); sc != "" {
				return conv{Scenario: sc, Role: RoleMain, Step: o.steps}
			}
		}
	}
	return conv{Role: RoleSide, Kind: SideOther, Step: o.steps}
}

// openAIReply is the scripted reply for c with the usage of its role and
// step. The subagent scenarios answer with plain text: no request offers
// an Agent tool.
func openAIReply(c conv, o *openAIConv) (reply, int64) {
	r := reply{Blocks: []block{text("OK")}}
	switch {
	case c.Role == RoleMain && c.Scenario == "probe":
		r = probeReply(c.Step, o.promptText(), o.lastOutput)
	case c.Role == RoleMain:
		r = mainReply(c, &messagesRequest{})
	}
	u, reasoning := openAIUsage(c.Role, c.Step)
	r.Usage = u
	if !r.hasBlock("thinking") {
		reasoning = 0
	}
	return r, reasoning
}

func (r *reply) hasBlock(typ string) bool {
	for _, b := range r.Blocks {
		if b.Type == typ {
			return true
		}
	}
	return false
}

// shellCall is a script's Bash block as a call of the shell tool that the
// request offers: its name and its JSON arguments.
func shellCall(b block, o *openAIConv) (string, string) {
	if b.ToolName != "Bash" {
		return b.ToolName, b.inputJSON()
	}
	cmd, desc := "", ""
	for _, p := range b.ToolInput {
		switch p.K {
		case "command":
			cmd, _ = p.V.(string)
		case "description":
			desc, _ = p.V.(string)
		}
	}
	var name string
	var args obj
	switch {
	case o.hasTool("exec_command"): // codex
		name, args = "exec_command", obj{{"cmd", cmd}}
	case o.hasTool("shell_command"):
		name, args = "shell_command", obj{{"command", cmd}}
	case o.hasTool("shell"):
		name, args = "shell", obj{{"command", []string{"bash", "-lc", cmd}}}
	default: // pi, dsh and most chat agents
		name, args = "bash", obj{{"command", cmd}}
		if slices.Contains(o.wantsDescription, "bash") {
			args = append(args, kv{"description", desc})
		}
	}
	data, _ := marshal(args)
	return name, string(data)
}

// openAIError is the body of an OpenAI API error with this status (the
// scenarios have 401 and 500).
func openAIError(status int) obj {
	typ, code, msg := "server_error", any(nil), "The server had an error while processing your request. Sorry about that!"
	if status == http.StatusUnauthorized {
		typ, code, msg = "invalid_request_error", "invalid_api_key", "mockmodel: Incorrect API key provided."
	}
	return obj{{"error", obj{{"message", msg}, {"type", typ}, {"param", nil}, {"code", code}}}}
}

// badRequest answers 400 with an OpenAI error body.
func badRequest(w http.ResponseWriter, msg string, param any) {
	writeJSON(w, http.StatusBadRequest, obj{{"error", obj{{"message", msg}, {"type", "invalid_request_error"}, {"param", param}, {"code", nil}}}})
}

// serveOpenAI is the part both APIs share: classify, reply, record. write
// streams the reply and returns whether it was complete.
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, body []byte, api, model string, stream bool, o *openAIConv,
	write func(ctx context.Context, rep *reply, reasoning int64, id ids) bool, whole func(rep *reply, reasoning int64, id ids) obj) {
	c := o.classify()
	rep, reasoning := openAIReply(c, o)
	s.logRequest(r, body, map[string]any{"api": api, "scenario": c.Scenario, "role": c.Role, "kind": c.Kind, "step": c.Step})
	call := Call{API: api, Scenario: c.Scenario, Role: c.Role, Kind: c.Kind, Step: c.Step, Model: model, Stream: stream, Key: s.keyOf()}
	who := c.Kind
	if who == "" {
		who = c.Role
	}
	prefix := map[string]string{APIResponses: "resp", APIChat: "chatcmpl"}[api]
	msgID, n := s.nextID(fmt.Sprintf("%s_mock_%s_%s_%d", prefix, orNone(c.Scenario), who, c.Step))
	id := ids{msg: msgID, tool: func(i int) string {
		t := fmt.Sprintf("call_mock_%s_%s_%d_%d", orNone(c.Scenario), who, c.Step, i)
		if n > 0 {
			t += fmt.Sprintf("_r%d", n)
		}
		return t
	}}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		call.Status = rep.Status
		writeJSON(w, rep.Status, openAIError(rep.Status))
		s.record(call)
		return
	}
	call.Status = http.StatusOK
	if !stream {
		// The whole reply at once (the slow scenario's text is not drawn
		// out: there is no stream to keep open).
		writeJSON(w, http.StatusOK, whole(&rep, reasoning, id))
		call.Usage = rep.Usage
		s.record(call)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	complete := write(ctx, &rep, reasoning, id)
	// OpenAI reports usage only at the end of a stream: a cut stream served
	// none that a client could count.
	if complete {
		call.Usage = rep.Usage
	}
	call.Aborted = !complete
	s.record(call)
}

// slowDeltas calls send with the reply's slow chunk every interval until
// max has passed (true) or the client went away (false).
func slowDeltas(ctx context.Context, chunk string, every, max time.Duration, send func(string) error) bool {
	if chunk == "" {
		chunk = "tick "
	}
	deadline := time.Now().Add(max)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if send(chunk) != nil {
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

// textParts is the text of a string or of a list of content parts.
func textParts(raw json.RawMessage) string {
	c := strings.TrimSpace(string(raw))
	if c == "" || c == "null" {
		return ""
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}
