package pi

import (
	"encoding/json"

	"github.com/agentrun-dev/agentrun/events"
)

// The subset of `pi --mode json` lines that the adapter reads. One struct
// for every line type keeps decoding to a single pass; decode.go decodes
// them.
type wireLine struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`      // session
	Message *wireMessage `json:"message"` // message_start, message_end
	Event   *wireUpdate  `json:"assistantMessageEvent"`

	// tool_execution_start, tool_execution_end
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
	IsError    *bool           `json:"isError"`

	// auto_retry_end
	Success    *bool  `json:"success"`
	FinalError string `json:"finalError"`
}

// updateLine is a message_update without the message so far.
type updateLine struct {
	Event *wireUpdate `json:"assistantMessageEvent"`
}

type wireUpdate struct {
	Type  string `json:"type"` // text_start, text_delta, thinking_delta, toolcall_delta, ...
	Delta string `json:"delta"`
}

type wireMessage struct {
	Role         string          `json:"role"`    // user, assistant, toolResult
	Content      json.RawMessage `json:"content"` // a string or blocks
	Model        string          `json:"model"`
	Usage        *wireUsage      `json:"usage"`
	StopReason   string          `json:"stopReason"` // stop, toolUse, length, error, aborted
	ErrorMessage string          `json:"errorMessage"`
}

type wireBlock struct {
	Type string `json:"type"` // text, thinking, toolCall, image
	Text string `json:"text"`
}

// wireUsage is pi's usage of one model call. Its input is already without
// the cached tokens (pi subtracts them), as in the unified meaning.
type wireUsage struct {
	Input      *int64    `json:"input"`
	Output     *int64    `json:"output"`
	CacheRead  *int64    `json:"cacheRead"`
	CacheWrite *int64    `json:"cacheWrite"`
	Cost       *wireCost `json:"cost"`
}

// wireCost is pi's cost of a call, from its own prices.
type wireCost struct {
	Total *float64 `json:"total"`
}

func (u *wireUsage) counts() events.TokenCounts {
	c := events.TokenCounts{InputTokens: u.Input, OutputTokens: u.Output, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite}
	if u.Cost != nil {
		c.CostUSD = u.Cost.Total
	}
	if c.CostUSD != nil && *c.CostUSD == 0 && !u.zero() {
		// pi writes 0 for a model it has no prices for: unknown, not
		// free (a reader would take $0.0000 for free).
		c.CostUSD = nil
	}
	return c
}

// zero reports a usage without a single token.
func (u *wireUsage) zero() bool {
	for _, p := range []*int64{u.Input, u.Output, u.CacheRead, u.CacheWrite} {
		if p != nil && *p != 0 {
			return false
		}
	}
	return true
}

// toolArgs holds the arguments that summaries use (read, bash, edit,
// write, grep, find, ls).
type toolArgs struct {
	Command string `json:"command"`
	Path    string `json:"path"`
	Pattern string `json:"pattern"`
}
