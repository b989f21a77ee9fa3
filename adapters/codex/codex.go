// Package codex is the adapter for OpenAI's codex CLI in `codex exec --json`
// mode (docs/runtimes.md for how it is started, docs/events.md's notes on codex;
// the README of testdata/real for what 0.171.0 really writes).
//
// codex reports one usage per turn (turn.completed), with no model name and
// no cost, and input_tokens that INCLUDE the cached tokens; the adapter
// reports the --model value as the model and the input without the cached
// part. It does not echo the prompt (agentrun emits it) and shows no
// subagent events.
package codex

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// Name is the runtime's name in flags, events and the API.
const Name = "codex"

func init() {
	adapters.Register(adapters.Runtime{Name: Name, BinaryEnv: "AGENTRUN_CODEX_BIN",
		New: func() adapters.Adapter { return New() }})
}

// Adapter holds the state of one run.
type Adapter struct {
	model string // --model: codex names none in its output

	turns     int     // turns started, for call ids
	turnDone  bool    // a turn.completed was seen
	turnError *string // turn.failed's message
	lastError string  // the last error event's message

	dec wirejson.Decoder // reused for every line
}

// New returns an adapter for one run.
func New() *Adapter { return &Adapter{} }

// Replay takes the model of the run whose output is replayed.
func (a *Adapter) Replay(spec adapters.LaunchSpec) { a.model = spec.Model }

// Translate handles one line of `codex exec --json`.
func (a *Adapter) Translate(line []byte, emit adapters.Emit) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l wireLine
	if err := decodeLine(&a.dec, line, &l); err != nil {
		// Only syntax errors make a line unusable: a field of an unexpected
		// type is skipped, as encoding/json skips it, and the rest still
		// counts.
		return
	}
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			emit(records.Session{ID: l.ThreadID})
		}
	case "turn.started":
		a.turns++
		a.turnDone, a.turnError = false, nil
		emit(records.CallStart{CallID: a.callID()})
	case "item.started":
		if it := l.Item; it != nil && isTool(it.Type) {
			emit(records.ToolStart{ID: it.ID, Name: it.Type, Summary: summary(it)})
		}
	case "item.completed":
		a.itemCompleted(l.Item, emit)
	case "turn.completed":
		a.turnDone = true
		if l.Usage != nil {
			emit(records.Usage{CallID: a.callID(), Model: a.model, Counts: counts(l.Usage)})
		}
	case "turn.failed":
		msg := "codex reported a failed turn without a message"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		a.turnError = &msg
	case "error":
		if l.Message != "" {
			a.lastError = l.Message
		}
	}
}

// callID names the current turn: codex reports usage per turn, so a turn
// stands for the model calls it made.
func (a *Adapter) callID() string { return "codex-turn-" + strconv.Itoa(a.turns) }

func (a *Adapter) itemCompleted(it *wireItem, emit adapters.Emit) {
	if it == nil {
		return
	}
	switch {
	case it.Type == "agent_message":
		if strings.TrimSpace(it.Text) != "" {
			emit(records.Text{Text: it.Text})
		}
	case isTool(it.Type):
		// Runtimes that report a call only when it ends get tool_start and
		// tool together: the fallbacks name the call.
		emit(records.ToolEnd{ID: it.ID, Denied: it.Status == "declined", Error: toolError(it),
			Name: it.Type, Summary: summary(it)})
	}
}

// isTool tells the items that are something the agent did from its text,
// its reasoning, its plan and codex's own warnings.
func isTool(typ string) bool {
	switch typ {
	case "", "agent_message", "reasoning", "todo_list", "error":
		return false
	}
	return true
}

// toolError is codex's own account of whether the call failed: a failed
// or non-zero status, an MCP error; null when the item says nothing.
func toolError(it *wireItem) *bool {
	switch {
	case it.Status == "declined":
		return events.Bool(false)
	case it.Status == "failed" || (it.Error != nil && it.Error.Message != ""):
		return events.Bool(true)
	case it.ExitCode != nil:
		return events.Bool(*it.ExitCode != 0)
	case it.Status == "completed":
		return events.Bool(false)
	}
	return nil
}

// counts converts codex's usage to the unified meaning: codex's
// input_tokens include the cached tokens, the unified input does not.
func counts(u *wireUsage) events.TokenCounts {
	c := events.TokenCounts{OutputTokens: u.OutputTokens, CacheReadTokens: u.CachedInputTokens,
		CacheWriteTokens: u.CacheWriteInputTokens}
	if u.InputTokens != nil {
		in := *u.InputTokens
		if u.CachedInputTokens != nil {
			in = max(in-*u.CachedInputTokens, 0)
		}
		c.InputTokens = events.Int64(in)
	}
	return c
}

// Close has nothing owed: codex reports usage only at a turn's end, and the
// aggregator ends the tool calls still open.
func (a *Adapter) Close(adapters.Emit) {}

// Verdict: a failed turn fails the run with codex's message; so does a
// non-zero exit (API errors exit 1, and so does SIGINT, with no closing
// event) or an exit before the turn completed.
func (a *Adapter) Verdict(exit adapters.Exit) adapters.Verdict {
	switch {
	case a.turnError != nil:
		return adapters.Verdict{Failed: true, Detail: *a.turnError}
	case exit.Signaled || exit.Code != 0:
		return adapters.Verdict{Failed: true, Detail: a.lastError}
	case !a.turnDone:
		detail := a.lastError
		if detail == "" {
			detail = "codex exited without completing the turn"
		}
		return adapters.Verdict{Failed: true, Detail: detail, Unfinished: a.lastError == ""}
	}
	return adapters.Verdict{}
}
