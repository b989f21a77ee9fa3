// Package claudecode is the adapter for Anthropic's claude-code CLI in
// stream-json mode (docs/events.md, "claude-code", for what the stream gets
// from it; docs/runtimes.md for how it is started, testdata/real for its format).
package claudecode

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/recent"
	"github.com/agentrun-dev/agentrun/internal/safefile"
	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// Name is the runtime's name in flags, events and the API.
const Name = "claude-code"

func init() {
	adapters.Register(adapters.Runtime{Name: Name, BinaryEnv: "AGENTRUN_CLAUDE_BIN",
		New: func() adapters.Adapter { return New() }})
}

// subagentTools are the tool names that start a subagent: "Agent" in
// tool_use blocks, "Task" in init's tool list and in older versions.
var subagentTools = map[string]bool{"Agent": true, "Task": true}

// syntheticModel marks messages claude-code wrote itself (API errors).
const syntheticModel = "<synthetic>"

// Adapter holds the state of one run.
type Adapter struct {
	prompted bool
	images   []string // --image paths as given, for the prompt event

	subagents     map[string]*subagentState // running subagents by Agent tool_use id
	endedSubs     *recent.Set
	taskToTool    map[string]string // task_id → Agent tool_use id
	denied        map[string]bool   // tool_use ids the permission layer denied
	calls         map[string]*call  // message id → call whose usage is not emitted yet
	callOrder     []string
	finishedCalls *recent.Set // message ids whose usage is out: later blocks of them add nothing
	streamingID   string      // the message id of the main agent's current stream_event call
	subagentsSeen int         // subagents started so far

	lastResult *wireLine
	apiError   string // the text of the last synthetic API error message

	dec wirejson.Decoder // reused for every line
}

type subagentState struct {
	started    int // the order subagents started in, for Close
	background bool
	completed  bool // task_updated said completed; the report may follow
}

// finishedWindow bounds the ids of finished calls and subagents that are
// remembered, so the adapter's memory does not grow with the stream.
const finishedWindow = 4096

type call struct {
	id, parent, model string
	usage             events.TokenCounts
	// outputFinal is set once a report of the call's final output count
	// arrived. In 2.1.328 the assistant lines carry message_start's usage,
	// whose output_tokens is a placeholder; only message_delta (main agent,
	// with --include-partial-messages), a subagent's closing report and a
	// call fetched without streaming (a complete message, with its
	// stop_reason) give the real count. Without one the output is null.
	outputFinal bool
}

// New returns an adapter for one run.
func New() *Adapter {
	return &Adapter{
		subagents:     map[string]*subagentState{},
		endedSubs:     recent.New(finishedWindow),
		taskToTool:    map[string]string{},
		denied:        map[string]bool{},
		calls:         map[string]*call{},
		finishedCalls: recent.New(finishedWindow),
	}
}

// Launch builds the command of docs/events.md's example start.argv: the
// prompt goes in as a stream-json user message and comes back through
// --replay-user-messages, so the stream itself records it.
// --include-partial-messages is added because in 2.1.328 only the
// message_delta stream event carries a call's final output token count.
func (a *Adapter) Launch(spec adapters.LaunchSpec) (*adapters.Launch, error) {
	argv := []string{spec.Binary, "-p",
		"--input-format", "stream-json", "--replay-user-messages",
		"--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	if spec.Model != "" {
		argv = append(argv, "--model", spec.Model)
	}
	switch {
	case spec.Resume != "":
		argv = append(argv, "--resume", spec.Resume)
	case spec.SessionID != "":
		argv = append(argv, "--session-id", spec.SessionID)
	default:
		argv = append(argv, "--no-session-persistence")
	}
	argv = append(argv, "--permission-mode", "auto", "--setting-sources", "", "--strict-mcp-config")
	if spec.NoSubagents {
		argv = append(argv, "--disallowedTools", "Task", "Agent")
	}
	stdin, err := userMessage(spec.Files(), spec.Prompt, spec.Images)
	if err != nil {
		return nil, err
	}
	a.images = spec.Images
	env := []string{
		// claude-code keeps its sessions, settings and caches here; a private
		// directory keeps runs apart and lets --session-dir find the session.
		"CLAUDE_CONFIG_DIR=" + filepath.Join(spec.StateDir, "claude"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1",
	}
	return &adapters.Launch{Argv: argv, Env: env, Stdin: stdin, EchoesPrompt: true}, nil
}

// userMessage is the stream-json line that carries the prompt and images.
func userMessage(files safefile.Guard, prompt string, images []string) ([]byte, error) {
	var content any = prompt
	if len(images) > 0 {
		blocks := make([]map[string]any, 0, len(images)+1)
		for _, p := range images {
			data, err := files.ReadFile(p, adapters.MaxImageBytes)
			if err != nil {
				return nil, fmt.Errorf("--image %s: %w", p, err)
			}
			mt := mime.TypeByExtension(strings.ToLower(filepath.Ext(p)))
			if !strings.HasPrefix(mt, "image/") {
				return nil, fmt.Errorf("--image %s: not a known image type (use .png, .jpg, .gif or .webp)", p)
			}
			blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{
				"type": "base64", "media_type": mt, "data": base64.StdEncoding.EncodeToString(data)}})
		}
		blocks = append(blocks, map[string]any{"type": "text", "text": prompt})
		content = blocks
	}
	msg := map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": content}}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Translate handles one stream-json line.
func (a *Adapter) Translate(line []byte, emit adapters.Emit) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l wireLine
	if err := decodeLine(&a.dec, line, &l); err != nil {
		// Only syntax errors make a line unusable: a field of an unexpected
		// type (permission_denied's "message" is a string, not a message
		// object) is skipped, as encoding/json skips it, and the rest still
		// counts.
		return
	}
	parent := ""
	if l.ParentToolUseID != nil {
		parent = *l.ParentToolUseID
	}
	switch l.Type {
	case "system":
		a.system(&l, emit)
	case "assistant":
		a.assistant(&l, parent, emit)
	case "user":
		a.user(&l, parent, emit)
	case "stream_event":
		a.streamEvent(&l, parent, emit)
	case "result":
		a.result(&l, emit)
	}
}

func (a *Adapter) system(l *wireLine, emit adapters.Emit) {
	switch l.Subtype {
	case "init":
		if l.SessionID != "" {
			emit(records.Session{ID: l.SessionID})
		}
	case "permission_denied":
		a.denied[l.ToolUseID] = true
	case "task_started":
		if l.TaskType != "" && l.TaskType != "local_agent" {
			return
		}
		if a.endedSubs.Has(l.ToolUseID) {
			return
		}
		a.taskToTool[l.TaskID] = l.ToolUseID
		s := a.subagents[l.ToolUseID]
		if s == nil {
			// The Agent tool_use line was not seen (a cut stream): start the
			// subagent from what the task line says.
			s = a.newSubagent(l.ToolUseID)
			emit(records.SubagentStart{ID: l.ToolUseID, Kind: l.SubagentType, Description: l.Description})
		}
		if l.IsBackgrounded != nil && *l.IsBackgrounded {
			s.background = true
		}
	case "task_notification":
		id := l.ToolUseID
		if id == "" {
			id = a.taskToTool[l.TaskID]
		}
		if l.Usage != nil && l.Usage.TotalTokens != nil {
			// total_tokens is the last call's context plus its output.
			a.finishLastCall(id, func(c *call) *int64 {
				if ctx := c.usage.Context(); ctx != nil && *l.Usage.TotalTokens >= *ctx {
					return events.Int64(*l.Usage.TotalTokens - *ctx)
				}
				return nil
			})
		}
		a.endSubagent(id, l.Status != "" && l.Status != "completed", emit)
	case "task_updated":
		if l.Patch == nil {
			return
		}
		id, ok := a.taskToTool[l.TaskID]
		if !ok {
			return
		}
		switch l.Patch.Status {
		case "killed", "failed":
			a.endSubagent(id, true, emit)
		case "completed":
			// task_notification or the Agent tool result follows with the
			// closing report; end there, or at Close if neither comes.
			if s := a.subagents[id]; s != nil {
				s.completed = true
			}
		}
	}
}

func (a *Adapter) newSubagent(id string) *subagentState {
	a.subagentsSeen++
	s := &subagentState{started: a.subagentsSeen}
	a.subagents[id] = s
	return s
}

// finishLastCall sets the final output of subagent id's pending call from
// its closing report.
func (a *Adapter) finishLastCall(id string, output func(*call) *int64) {
	for i := len(a.callOrder) - 1; i >= 0; i-- {
		c := a.calls[a.callOrder[i]]
		if c.parent != id {
			continue
		}
		if !c.outputFinal {
			if out := output(c); out != nil {
				c.usage.OutputTokens, c.outputFinal = out, true
			}
		}
		return
	}
}

func (a *Adapter) endSubagent(id string, failed bool, emit adapters.Emit) {
	if _, running := a.subagents[id]; !running {
		return
	}
	a.flushCalls(func(c *call) bool { return c.parent == id }, emit)
	delete(a.subagents, id)
	a.endedSubs.Add(id)
	for task, tool := range a.taskToTool {
		if tool == id {
			delete(a.taskToTool, task)
		}
	}
	emit(records.SubagentEnd{ID: id, Failed: failed})
}

func (a *Adapter) assistant(l *wireLine, parent string, emit adapters.Emit) {
	m := l.Message
	if m == nil {
		return
	}
	if l.IsAPIError || m.Model == syntheticModel {
		// claude-code wrote this message itself: no model call, no usage
		// (docs/events.md, "usage"). Its text is the error the run failed with.
		for _, b := range a.blocks(m.Content) {
			if b.Type == "text" && b.Text != "" {
				a.apiError = b.Text
			}
		}
		return
	}
	if m.ID != "" {
		// A new call of this agent means its previous call is over.
		a.flushCalls(func(c *call) bool { return c.parent == parent && c.id != m.ID }, emit)
		c := a.call(m.ID, parent, m.Model, emit)
		if m.Usage != nil && a.streamingID != m.ID && !a.finishedCalls.Has(m.ID) {
			c.usage = mergeUsage(c.usage, m.Usage)
			// A message with its stop reason is complete: claude-code
			// fetched it without streaming (its fallback when a stream
			// breaks), and its output count is the final one.
			if m.StopReason != nil && m.Usage.OutputTokens != nil {
				c.outputFinal = true
			}
			emit(records.CallUsage{Parent: parent, CallID: m.ID, Counts: c.usage})
		}
	}
	for _, b := range a.blocks(m.Content) {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) != "" {
				emit(records.Text{Parent: parent, Text: b.Text})
			}
		case "tool_use":
			a.toolUse(b, parent, emit)
		}
	}
}

func (a *Adapter) toolUse(b wireBlock, parent string, emit adapters.Emit) {
	var in toolInput
	_ = json.Unmarshal(b.Input, &in)
	if subagentTools[b.Name] {
		if _, seen := a.subagents[b.ID]; seen || a.endedSubs.Has(b.ID) {
			return
		}
		a.newSubagent(b.ID).background = in.RunInBackground != nil && *in.RunInBackground
		kind := in.SubagentType
		if kind == "" {
			kind = "general-purpose"
		}
		emit(records.SubagentStart{ID: b.ID, Parent: parent, Kind: kind, Model: in.Model, Description: in.Description})
		return
	}
	emit(records.ToolStart{ID: b.ID, Parent: parent, Name: b.Name, Summary: summary(b.Name, in)})
}

func (a *Adapter) user(l *wireLine, parent string, emit adapters.Emit) {
	m := l.Message
	if m == nil {
		return
	}
	if l.IsReplay && parent == "" {
		if !a.prompted {
			a.prompted = true
			emit(records.Prompt{Text: a.promptText(m.Content), Images: a.images})
		}
		return
	}
	if parent == "" {
		// A tool result means the main agent's call that asked for it is
		// over. A subagent's last call stays pending until the subagent's
		// closing report, which holds that call's final output count.
		a.flushCalls(func(c *call) bool { return c.parent == "" }, emit)
	}
	deniedByMeta := map[string]bool{}
	for _, meta := range l.ToolResultMeta {
		if meta.NonExecutionKind != "" {
			deniedByMeta[meta.ID] = true
		}
	}
	for _, b := range a.blocks(m.Content) {
		if b.Type != "tool_result" {
			continue
		}
		failed := b.IsError != nil && *b.IsError
		if a.endedSubs.Has(b.ToolUseID) {
			continue
		}
		if s, ok := a.subagents[b.ToolUseID]; ok {
			res := a.agentResult(l.ToolUseResult)
			// A background subagent's tool result only says it was launched;
			// its end comes later as task_notification or task_updated.
			if !failed && (s.background || res.Status == "async_launched") {
				s.background = true
				continue
			}
			if res.Usage != nil {
				a.finishLastCall(b.ToolUseID, func(c *call) *int64 {
					if sameInput(c.usage, res.Usage) {
						return res.Usage.OutputTokens
					}
					return nil
				})
			}
			a.endSubagent(b.ToolUseID, failed, emit)
			continue
		}
		denied := a.denied[b.ToolUseID] || deniedByMeta[b.ToolUseID]
		delete(a.denied, b.ToolUseID)
		emit(records.ToolEnd{ID: b.ToolUseID, Denied: denied, Error: events.Bool(failed && !denied)})
	}
}

// agentResult reads an Agent call's tool_use_result (a string when the
// call failed).
func (a *Adapter) agentResult(raw json.RawMessage) agentResult {
	var r agentResult
	if len(raw) > 0 && raw[0] == '{' {
		a.dec.Reset(raw)
		_ = decodeWireAgentResult(&a.dec, &r)
	}
	return r
}

// sameInput reports whether a closing report's usage is that of call c.
func sameInput(c events.TokenCounts, u *wireUsage) bool {
	eq := func(a, b *int64) bool { return a != nil && b != nil && *a == *b }
	return eq(c.InputTokens, u.InputTokens) && eq(c.CacheReadTokens, u.CacheReadInputTokens) &&
		eq(c.CacheWriteTokens, u.CacheCreationInputTokens)
}

func (a *Adapter) streamEvent(l *wireLine, parent string, emit adapters.Emit) {
	ev := l.Event
	if ev == nil {
		return
	}
	switch ev.Type {
	case "message_start":
		if ev.Message == nil || ev.Message.ID == "" {
			return
		}
		a.flushCalls(func(c *call) bool { return c.parent == parent && c.id != ev.Message.ID }, emit)
		a.streamingID = ev.Message.ID
		c := a.call(ev.Message.ID, parent, ev.Message.Model, emit)
		if ev.Message.Usage != nil {
			c.usage = mergeUsage(c.usage, ev.Message.Usage)
			emit(records.CallUsage{Parent: parent, CallID: c.id, Counts: c.usage})
		}
	case "message_delta":
		c := a.calls[a.streamingID]
		if c == nil || ev.Usage == nil {
			return
		}
		c.usage = mergeUsage(c.usage, ev.Usage)
		c.outputFinal = ev.Usage.OutputTokens != nil
		emit(records.CallUsage{Parent: c.parent, CallID: c.id, Counts: c.usage})
	case "content_block_delta":
		// The text being written, for the live view only: the assistant
		// line with the whole block follows and makes the text event.
		if d := ev.Delta; d != nil && d.Type == "text_delta" && d.Text != "" {
			emit(records.PartialText{Parent: parent, Text: d.Text})
		}
	case "message_stop":
		id := a.streamingID
		a.flushCalls(func(c *call) bool { return c.id == id }, emit)
	}
}

func (a *Adapter) result(l *wireLine, emit adapters.Emit) {
	a.flushCalls(func(*call) bool { return true }, emit)
	copy := *l
	// Only the result fields are kept: the raw ones (and the message's
	// content) are slices of the line, which is reused.
	copy.Message, copy.Event, copy.Error, copy.ToolUseResult = nil, nil, nil, nil
	a.lastResult = &copy
	if l.SessionID != "" {
		emit(records.Session{ID: l.SessionID})
	}
	for _, d := range l.PermissionDenials {
		a.denied[d.ToolUseID] = true
	}
	emit(records.Total{Usage: totals(l)})
}

// totals is end.usage from a result line. modelUsage accumulates over the
// whole process (every turn, subagents and claude-code's own helper calls),
// so the last result holds the run's total. An empty modelUsage gives nulls,
// cost included, even when total_cost_usd is 0 (docs/events.md, "claude-code").
func totals(l *wireLine) events.Totals {
	t := events.NewTotals()
	if len(l.ModelUsage) == 0 {
		return t
	}
	// Sorted: the sums of costs are the same in every replay.
	models := make([]string, 0, len(l.ModelUsage))
	for model := range l.ModelUsage {
		models = append(models, model)
	}
	sort.Strings(models)
	for _, model := range models {
		mu := l.ModelUsage[model]
		t.AddModel(model, events.TokenCounts{InputTokens: mu.InputTokens, OutputTokens: mu.OutputTokens,
			CacheReadTokens: mu.CacheReadInputTokens, CacheWriteTokens: mu.CacheCreationInputTokens, CostUSD: mu.CostUSD})
	}
	if l.TotalCostUSD != nil {
		t.CostUSD = events.Float64(*l.TotalCostUSD)
	}
	return t
}

// call returns the pending call id, starting it when new. A call whose usage
// is already out gives a throwaway call, so its late blocks add nothing.
func (a *Adapter) call(id, parent, model string, emit adapters.Emit) *call {
	if a.finishedCalls.Has(id) {
		return &call{id: id, parent: parent, model: model}
	}
	c := a.calls[id]
	if c == nil {
		c = &call{id: id, parent: parent, model: model}
		a.calls[id] = c
		a.callOrder = append(a.callOrder, id)
		emit(records.CallStart{Parent: parent, CallID: id})
	}
	if c.model == "" {
		c.model = model
	}
	return c
}

// flushCalls emits the usage of the pending calls that match, in the order
// the calls started, and forgets them.
func (a *Adapter) flushCalls(match func(*call) bool, emit adapters.Emit) {
	kept := a.callOrder[:0]
	for _, id := range a.callOrder {
		c := a.calls[id]
		if !match(c) {
			kept = append(kept, id)
			continue
		}
		counts := c.usage
		if !c.outputFinal {
			counts.OutputTokens = nil
		}
		emit(records.Usage{Parent: c.parent, CallID: c.id, Model: c.model, Counts: counts})
		delete(a.calls, id)
		a.finishedCalls.Add(id)
	}
	a.callOrder = kept
}

// mergeUsage takes the later report of each field: message_delta carries the
// call's final cumulative counts, message_start only the input side.
func mergeUsage(c events.TokenCounts, u *wireUsage) events.TokenCounts {
	if u.InputTokens != nil {
		c.InputTokens = events.Int64(*u.InputTokens)
	}
	if u.OutputTokens != nil {
		c.OutputTokens = events.Int64(*u.OutputTokens)
	}
	if u.CacheReadInputTokens != nil {
		c.CacheReadTokens = events.Int64(*u.CacheReadInputTokens)
	}
	if u.CacheCreationInputTokens != nil {
		c.CacheWriteTokens = events.Int64(*u.CacheCreationInputTokens)
	}
	return c
}

// Close ends the subagents claude-code reported completed without a closing
// report, and emits the usage of calls that never reported their end.
func (a *Adapter) Close(emit adapters.Emit) {
	// In the order they started: the same output gives the same stream.
	var completed []string
	for id, s := range a.subagents {
		if s.completed {
			completed = append(completed, id)
		}
	}
	sort.Slice(completed, func(i, j int) bool {
		return a.subagents[completed[i]].started < a.subagents[completed[j]].started
	})
	for _, id := range completed {
		a.endSubagent(id, false, emit)
	}
	a.flushCalls(func(*call) bool { return true }, emit)
}

// Verdict applies the rules of docs/events.md, "claude-code": a non-zero exit fails; with exit 0 the
// last result's is_error decides; no result at all means the process was
// killed.
func (a *Adapter) Verdict(exit adapters.Exit) adapters.Verdict {
	r := a.lastResult
	switch {
	case exit.Signaled:
		// The runner names the signal when claude-code said nothing.
		return adapters.Verdict{Failed: true, Detail: a.errorMessage()}
	case exit.Code != 0:
		return adapters.Verdict{Failed: true, Detail: a.errorMessage()}
	case r == nil:
		return adapters.Verdict{Failed: true, Detail: "claude-code exited without a result (killed or crashed before the turn ended)", Unfinished: true}
	case r.IsError:
		return adapters.Verdict{Failed: true, Detail: a.errorMessage()}
	}
	return adapters.Verdict{}
}

// errorMessage is claude-code's own account of the failure: the synthetic API
// error text, else the failing result's text or errors.
func (a *Adapter) errorMessage() string {
	if a.apiError != "" {
		return a.apiError
	}
	r := a.lastResult
	if r == nil || !r.IsError {
		return ""
	}
	if r.Result != nil && strings.TrimSpace(*r.Result) != "" {
		return *r.Result
	}
	if len(r.Errors) > 0 {
		return strings.Join(r.Errors, "; ")
	}
	if r.TerminalReason != "" {
		return fmt.Sprintf("claude-code ended with %s (terminal_reason %s)", r.Subtype, r.TerminalReason)
	}
	return ""
}

// blocks reads a message's content blocks (raw is part of a line that was
// decoded: valid JSON).
func (a *Adapter) blocks(raw json.RawMessage) []wireBlock {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var blocks []wireBlock
	a.dec.Reset(raw)
	_ = wirejson.Slice(&a.dec, &blocks, decodeWireBlock)
	return blocks
}

// promptText is the text of an echoed user message: a string, or the text
// blocks of a block list (images are listed from --image, not from here).
func (a *Adapter) promptText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		a.dec.Reset(raw)
		_ = a.dec.String(&s)
		return s
	}
	var parts []string
	for _, b := range a.blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
