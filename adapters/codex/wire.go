package codex

import "encoding/json"

// The subset of `codex exec --json` lines that the adapter reads. One struct
// for every line type keeps decoding to a single pass; decode.go decodes
// them.
type wireLine struct {
	Type     string     `json:"type"`
	ThreadID string     `json:"thread_id"` // thread.started
	Item     *wireItem  `json:"item"`      // item.started, item.updated, item.completed
	Usage    *wireUsage `json:"usage"`     // turn.completed
	Error    *wireError `json:"error"`     // turn.failed
	Message  string     `json:"message"`   // error
}

type wireError struct {
	Message string `json:"message"`
}

// wireItem is a thread item: agent_message, reasoning, command_execution,
// file_change, mcp_tool_call, web_search, todo_list, error, ...
type wireItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`      // agent_message, reasoning
	Command   string          `json:"command"`   // command_execution
	ExitCode  *int            `json:"exit_code"` // command_execution
	Status    string          `json:"status"`    // in_progress, completed, failed, declined
	Changes   []wireChange    `json:"changes"`   // file_change
	Server    string          `json:"server"`    // mcp_tool_call
	Tool      string          `json:"tool"`      // mcp_tool_call, collab tool calls
	Arguments json.RawMessage `json:"arguments"` // mcp_tool_call
	Error     *wireError      `json:"error"`     // mcp_tool_call
	Query     string          `json:"query"`     // web_search
}

// wireChange is one file of a file_change.
type wireChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // add, delete, update
}

// wireUsage is turn.completed's usage; input_tokens include the cached ones.
type wireUsage struct {
	InputTokens           *int64 `json:"input_tokens"`
	CachedInputTokens     *int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens *int64 `json:"cache_write_input_tokens"`
	OutputTokens          *int64 `json:"output_tokens"`
}
