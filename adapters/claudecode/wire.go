package claudecode

import "encoding/json"

// The subset of claude-code's stream-json lines (testdata/real has real ones) that the
// adapter reads. One struct for every line type keeps decoding to a single
// pass; fields a line type does not have stay zero.
type wireLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`

	// assistant, user, stream_event
	Message         *wireMessage         `json:"message"`
	ParentToolUseID *string              `json:"parent_tool_use_id"`
	IsReplay        bool                 `json:"isReplay"`
	IsSynthetic     bool                 `json:"isSynthetic"`
	IsAPIError      bool                 `json:"is_api_error_message"`
	Error           json.RawMessage      `json:"error"` // a string on assistant lines, a string on api_retry
	ToolUseResult   json.RawMessage      `json:"tool_use_result"`
	ToolResultMeta  []wireToolResultMeta `json:"tool_result_meta"`
	Event           *wireStreamEvent     `json:"event"`

	// system
	Model          string     `json:"model"`
	ToolName       string     `json:"tool_name"`
	ToolUseID      string     `json:"tool_use_id"`
	TaskID         string     `json:"task_id"`
	TaskType       string     `json:"task_type"`
	Description    string     `json:"description"`
	SubagentType   string     `json:"subagent_type"`
	IsBackgrounded *bool      `json:"is_backgrounded"`
	Status         string     `json:"status"`
	Patch          *wirePatch `json:"patch"`
	// task_notification: {"total_tokens": N, ...}; result: the main usage.
	Usage *wireTaskUsage `json:"usage"`

	// result
	IsError           bool                      `json:"is_error"`
	Result            *string                   `json:"result"`
	Errors            []string                  `json:"errors"`
	TerminalReason    string                    `json:"terminal_reason"`
	TotalCostUSD      *float64                  `json:"total_cost_usd"`
	ModelUsage        map[string]wireModelUsage `json:"modelUsage"`
	PermissionDenials []wireDenial              `json:"permission_denials"`
}

type wireToolResultMeta struct {
	ID               string `json:"id"`
	NonExecutionKind string `json:"non_execution_kind"`
}

type wirePatch struct {
	Status string `json:"status"`
}

type wireTaskUsage struct {
	TotalTokens *int64 `json:"total_tokens"`
}

type wireDenial struct {
	ToolUseID string `json:"tool_use_id"`
}

type wireMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"` // a string (echoed prompt) or blocks
	Usage   *wireUsage      `json:"usage"`
	// StopReason is null on the assistant lines of a streamed call and set
	// on a complete message (a call fetched without streaming).
	StopReason *string `json:"stop_reason"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   *bool           `json:"is_error"`
}

type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

type wireStreamEvent struct {
	Type    string       `json:"type"`
	Message *wireMessage `json:"message"` // message_start
	Usage   *wireUsage   `json:"usage"`   // message_delta
	Delta   *wireDelta   `json:"delta"`   // content_block_delta
}

// wireDelta is a content_block_delta's delta: text_delta carries text.
type wireDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireModelUsage struct {
	InputTokens              *int64   `json:"inputTokens"`
	OutputTokens             *int64   `json:"outputTokens"`
	CacheReadInputTokens     *int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens *int64   `json:"cacheCreationInputTokens"`
	CostUSD                  *float64 `json:"costUSD"`
}

// agentResult is the tool_use_result of an Agent call.
type agentResult struct {
	Status string     `json:"status"`
	Usage  *wireUsage `json:"usage"` // the subagent's last model call, final
}

// toolInput holds the input fields that summaries and subagent starts use.
type toolInput struct {
	Command         string `json:"command"`
	FilePath        string `json:"file_path"`
	Path            string `json:"path"`
	Pattern         string `json:"pattern"`
	URL             string `json:"url"`
	Query           string `json:"query"`
	Skill           string `json:"skill"`
	Description     string `json:"description"`
	Prompt          string `json:"prompt"`
	SubagentType    string `json:"subagent_type"`
	Model           string `json:"model"`
	RunInBackground *bool  `json:"run_in_background"`
	Script          string `json:"script"`
	NotebookPath    string `json:"notebook_path"`
	TaskID          string `json:"task_id"`
	Todos           []any  `json:"todos"`
}
