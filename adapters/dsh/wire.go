package dsh

import (
	"encoding/json"

	"github.com/agentrun-dev/agentrun/events"
)

// wireLine is one line of agentrun's plugin (stream.mjs): a session's
// header, one event of a session as dsh committed it, or a write of dsh to
// stdout. decode.go decodes the wire structs.
type wireLine struct {
	Agentrun string      `json:"agentrun"` // "session", "event", "stdout"
	Header   *wireHeader `json:"header"`   // session
	Session  string      `json:"session"`  // event: the session's id
	Event    *wireEvent  `json:"event"`    // event
	Text     *string     `json:"text"`     // stdout
}

// wireHeader is a session's header. A subagent's session has a parent and
// a delegation depth above 0.
type wireHeader struct {
	ID              string          `json:"id"`
	ParentSession   json.RawMessage `json:"parentSession"`
	DelegationDepth int             `json:"delegationDepth"`
}

// wireEvent is one session event (dsh-session's envelope: type, seq, time,
// data); data holds the fields of the types the adapter reads.
type wireEvent struct {
	Type string   `json:"type"`
	Data wireData `json:"data"`
}

type wireData struct {
	Turn int `json:"turn"`
	Step int `json:"step"`

	Content json.RawMessage `json:"content"` // user/message
	Source  *wireSource     `json:"source"`  // user/message

	Chunk   *wireChunk   `json:"chunk"`   // assistant/chunk
	Message *wireMessage `json:"message"` // assistant/message, tool/result
	Usage   *wireUsage   `json:"usage"`   // assistant/message

	CallID    string `json:"callId"`    // tool/call
	Name      string `json:"name"`      // tool/call
	Arguments string `json:"arguments"` // tool/call: the arguments' JSON

	Model  string      `json:"model"`  // request/context
	Reason *wireReason `json:"reason"` // turn/end
}

type wireSource struct {
	Kind   string `json:"kind"`   // user, model, tool, ...
	Model  string `json:"model"`  // model
	CallID string `json:"callId"` // tool
}

// wireChunk is one streamed piece of a model reply.
type wireChunk struct {
	Type      string      `json:"type"`      // block-start, text-delta, block-end, usage, finish, ...
	BlockType string      `json:"blockType"` // block-start: text, thinking, tool-call
	Text      string      `json:"text"`      // text-delta
	Usage     *wireUsage  `json:"usage"`
	Reason    *wireReason `json:"reason"` // finish
}

type wireMessage struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
	Source  *wireSource `json:"source"`
}

type wireBlock struct {
	Type       string          `json:"type"` // text, reasoning, tool-call, tool-result
	Text       string          `json:"text"`
	ToolCallID string          `json:"toolCallId"` // tool-result
	Content    json.RawMessage `json:"content"`    // tool-result: text blocks
	IsError    *bool           `json:"isError"`    // tool-result
}

// wireReason ends a turn (kind completed, error, ...) or a model reply.
type wireReason struct {
	Kind    string       `json:"kind"`
	Error   *wireFailure `json:"error"`   // turn/end
	Failure *wireFailure `json:"failure"` // finish
}

type wireFailure struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

// wireUsage is dsh's usage of one step. Its input already excludes the
// cached tokens (dsh subtracts them, as in the unified meaning). dsh leaves
// out cacheWriteTokens for the DeepSeek (OpenAI Chat Completions) API,
// which has no cache writes: it counts as 0 when the input is reported.
type wireUsage struct {
	InputTokens      *int64 `json:"inputTokens"`
	OutputTokens     *int64 `json:"outputTokens"`
	CacheReadTokens  *int64 `json:"cacheReadTokens"`
	CacheWriteTokens *int64 `json:"cacheWriteTokens"`
}

func (u *wireUsage) counts() events.TokenCounts {
	c := events.TokenCounts{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens}
	if c.CacheWriteTokens == nil && c.InputTokens != nil {
		c.CacheWriteTokens = new(int64)
	}
	return c
}

// toolArgs holds the arguments that summaries use.
type toolArgs struct {
	Command     string   `json:"command"`
	FilePath    string   `json:"file_path"`
	Path        string   `json:"path"`
	Pattern     string   `json:"pattern"`
	Description string   `json:"description"`
	Objective   string   `json:"objective"`
	Name        string   `json:"name"`
	Queries     []string `json:"queries"`
	JobID       string   `json:"job_id"`
}
