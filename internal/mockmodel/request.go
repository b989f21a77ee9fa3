package mockmodel

import (
	"encoding/json"
	"regexp"
	"strings"
)

// messagesRequest is the part of an Anthropic Messages API request body that
// the mock looks at.
type messagesRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []apiMessage    `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
	StopSequences []string `json:"stop_sequences"`
	Safeguards    []struct {
		Type string `json:"type"`
	} `json:"safeguards"`
}

// wantsSafeguard tells whether the request asks for the server-side safeguard
// of this type (claude-code's auto mode asks for "dangerous_tool_use").
func (r *messagesRequest) wantsSafeguard(t string) bool {
	for _, s := range r.Safeguards {
		if s.Type == t {
			return true
		}
	}
	return false
}

type apiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentBlock is one block of a message's content. Only the fields the mock
// reads are decoded.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Content   json.RawMessage `json:"content"`
	ToolUseID string          `json:"tool_use_id"`
	Name      string          `json:"name"`
	IsError   bool            `json:"is_error"`
}

// blocks returns the message content as blocks; a plain string content becomes
// one text block.
func (m apiMessage) blocks() []contentBlock {
	c := strings.TrimSpace(string(m.Content))
	if c == "" || c == "null" {
		return nil
	}
	if c[0] == '"' {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return []contentBlock{{Type: "text", Text: s}}
		}
		return nil
	}
	var bs []contentBlock
	if json.Unmarshal(m.Content, &bs) != nil {
		return nil
	}
	return bs
}

// texts returns the text of all text blocks of the message, and of text blocks
// nested in tool results.
func (m apiMessage) texts() []string {
	var out []string
	for _, b := range m.blocks() {
		switch b.Type {
		case "text":
			out = append(out, b.Text)
		case "tool_result":
			out = append(out, toolResultText(b.Content))
		}
	}
	return out
}

func toolResultText(raw json.RawMessage) string {
	c := strings.TrimSpace(string(raw))
	if c == "" || c == "null" {
		return ""
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	var bs []contentBlock
	if json.Unmarshal(raw, &bs) != nil {
		return ""
	}
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// systemText returns the system prompt as one string (it is either a string or
// an array of text blocks).
func (r *messagesRequest) systemText() string {
	c := strings.TrimSpace(string(r.System))
	if c == "" || c == "null" {
		return ""
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(r.System, &s)
		return s
	}
	var bs []contentBlock
	if json.Unmarshal(r.System, &bs) != nil {
		return ""
	}
	var parts []string
	for _, b := range bs {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

func (r *messagesRequest) hasTool(name string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// allText is the text of the system prompt and of all messages.
func (r *messagesRequest) allText() string {
	parts := []string{r.systemText()}
	for _, m := range r.Messages {
		parts = append(parts, m.texts()...)
	}
	return strings.Join(parts, "\n")
}

// firstUserText is the joined text of the conversation's first user message.
func (r *messagesRequest) firstUserText() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return strings.Join(m.texts(), "\n")
		}
	}
	return ""
}

// lastToolResult is the text of the conversation's latest tool result.
func (r *messagesRequest) lastToolResult() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		blocks := r.Messages[i].blocks()
		for j := len(blocks) - 1; j >= 0; j-- {
			if blocks[j].Type == "tool_result" {
				return toolResultText(blocks[j].Content)
			}
		}
	}
	return ""
}

// assistantTurns counts the assistant messages already in the conversation:
// the number of replies of the script that were served (and kept) before.
func (r *messagesRequest) assistantTurns() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

var (
	scenarioRe = regexp.MustCompile(`\bscenario:([A-Za-z0-9_-]+)`)
	subagentRe = regexp.MustCompile(`\bsubagent:([A-Za-z0-9_-]+)`)
)

// markers returns the scenario and subagent markers found in text ("" if none).
func markers(text string) (scenario, subagent string) {
	if m := subagentRe.FindStringSubmatch(text); m != nil {
		subagent = m[1]
	}
	if m := scenarioRe.FindStringSubmatch(text); m != nil {
		scenario = m[1]
	}
	return scenario, subagent
}
