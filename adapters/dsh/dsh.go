// Package dsh is the adapter for DeepSeek Harness (npm @deepseek-ai/dsh)
// in its headless profile, `dsh --profile headless` (docs/dsh.md for the
// version and why it runs this way; testdata/real for what it really
// writes).
//
// dsh's headless profile prints only its final answer. agentrun adds a
// plugin to the profile (stream.mjs) that writes every event of dsh's
// event-sourced sessions to stdout as one JSON line as the session commits
// it — the same events dsh persists in its session log — and wraps every
// other stdout write of dsh (the final answer) in a JSON line. The adapter
// translates the main session's events: the first user message is the
// prompt, tool/call and tool/result the tools, each step's assistant
// message its text and its usage (with the model it names), and turn/end
// the outcome. Subagents run in sessions of their own, which are skipped:
// a subagent call is an ordinary tool call. dsh runs with its own sandbox
// and approval prompts off (danger-full-access), so denied is always false.
package dsh

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// Name is the runtime's name in flags, events and the API.
const Name = "dsh"

func init() {
	adapters.Register(adapters.Runtime{Name: Name, BinaryEnv: "AGENTRUN_DSH_BIN",
		New: func() adapters.Adapter { return New() }})
}

// Adapter holds the state of one run.
type Adapter struct {
	flagModel string // --model, for usage that names no model
	main      string // the id of the main agent's session
	prompted  bool
	model     string // the model of the latest request (request/context)

	step    string     // call id of the step under way, "" before the first
	pending *wireUsage // usage streamed in this step and not yet reported
	partial strings.Builder
	inText  bool // the step's text streamed since its last assistant message

	tools map[string]string // tool name by call id

	turnEnded bool   // a turn/end came
	lastError string // the last turn's failure, "" when it completed

	dec wirejson.Decoder // reused for every line
}

// New returns an adapter for one run.
func New() *Adapter { return &Adapter{} }

// Translate handles one line of agentrun's plugin.
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
	switch l.Agentrun {
	case "session":
		if h := l.Header; h != nil && a.main == "" && h.ID != "" && h.DelegationDepth == 0 && isNull(h.ParentSession) {
			a.main = h.ID
		}
	case "stdout":
		// The headless runner's final answer: the last non-empty
		// assistant text of the task, written with a newline.
		if l.Text != nil {
			if t := strings.TrimSuffix(*l.Text, "\n"); strings.TrimSpace(t) != "" {
				emit(records.Result{Text: t})
			}
		}
	case "event":
		if l.Event == nil || l.Session == "" {
			return
		}
		if a.main == "" {
			a.main = l.Session
		}
		if l.Session == a.main {
			a.event(l.Event, emit)
		}
	}
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// event handles one event of the main session.
func (a *Adapter) event(e *wireEvent, emit adapters.Emit) {
	d := &e.Data
	switch e.Type {
	case "user/message":
		if !a.prompted && d.Source != nil && d.Source.Kind == "user" {
			a.prompted = true
			emit(records.Prompt{Text: a.textOf(d.Content), Images: []string{}})
		}
	case "request/context":
		if d.Model != "" {
			a.model = d.Model
		}
	case "step/start":
		a.flush(emit)
		a.step = "dsh-" + strconv.Itoa(d.Turn) + "-" + strconv.Itoa(d.Step)
		emit(records.CallStart{CallID: a.step})
	case "assistant/chunk":
		a.chunk(d.Chunk, emit)
	case "assistant/message":
		a.partial.Reset()
		a.inText = false
		model := a.model
		if m := d.Message; m != nil {
			for _, b := range m.Content {
				if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
					emit(records.Text{Text: b.Text})
				}
			}
			if m.Source != nil && m.Source.Model != "" {
				model = m.Source.Model
			}
		}
		u := d.Usage
		if u == nil {
			u = a.pending
		}
		a.pending = nil
		if u != nil {
			emit(records.Usage{CallID: a.step, Model: a.modelOr(model), Counts: u.counts()})
		}
	case "tool/call":
		if d.CallID != "" {
			if a.tools == nil {
				a.tools = map[string]string{}
			}
			a.tools[d.CallID] = d.Name
			emit(records.ToolStart{ID: d.CallID, Name: d.Name, Summary: summary(d.Name, d.Arguments)})
		}
	case "tool/result":
		a.toolResult(d.Message, emit)
	case "turn/end":
		a.turnEnded = true
		a.lastError = failure(d.Reason)
	}
}

func (a *Adapter) chunk(c *wireChunk, emit adapters.Emit) {
	if c == nil {
		return
	}
	switch c.Type {
	case "block-start":
		if c.BlockType == "text" && a.partial.Len() > 0 {
			a.partial.WriteByte('\n')
		}
	case "text-delta":
		a.partial.WriteString(c.Text)
		a.inText = true
	case "usage":
		if c.Usage != nil {
			a.pending = c.Usage
			emit(records.CallUsage{CallID: a.step, Counts: c.Usage.counts()})
		}
	}
}

func (a *Adapter) toolResult(m *wireMessage, emit adapters.Emit) {
	if m == nil {
		return
	}
	ended := false
	for _, b := range m.Content {
		if b.Type == "tool-result" && b.ToolCallID != "" {
			ended = true
			var failed *bool
			if b.IsError != nil {
				failed = events.Bool(*b.IsError || (a.tools[b.ToolCallID] == "bash" && a.bashFailed(b.Content)))
			}
			emit(records.ToolEnd{ID: b.ToolCallID, Error: failed})
		}
	}
	if !ended && m.Source != nil && m.Source.CallID != "" {
		emit(records.ToolEnd{ID: m.Source.CallID})
	}
}

// bashMarker is one of the lines dsh's bash tool appends to a command's
// output: the sandbox's denial, a timeout, a signal, a non-zero exit.
var bashMarker = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\[(exit code: -?[0-9]+|killed by signal: [A-Z0-9]+|timed out after [0-9]+ms|sandbox: .*)\]$`)
})

// bashFailed reports whether a bash result ends with the marker of a
// command that failed. dsh sets isError only when the command could not
// run at all; a non-zero exit is the "[exit code: N]" marker after the
// output, which is what the contract calls an error.
func (a *Adapter) bashFailed(raw json.RawMessage) bool {
	text := a.textOf(raw)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := len(lines) - 1; i >= 0 && bashMarker().MatchString(lines[i]); i-- {
		if lines[i] != "[exit code: 0]" {
			return true
		}
	}
	return false
}

// flush reports what the step under way still owes: the text it was
// streaming and its usage, when its assistant message never came.
func (a *Adapter) flush(emit adapters.Emit) {
	if a.inText && strings.TrimSpace(a.partial.String()) != "" {
		emit(records.Text{Text: a.partial.String()})
	}
	a.partial.Reset()
	a.inText = false
	if a.pending != nil {
		emit(records.Usage{CallID: a.step, Model: a.modelOr(a.model), Counts: a.pending.counts()})
		a.pending = nil
	}
}

func (a *Adapter) modelOr(m string) string {
	if m != "" {
		return m
	}
	return a.flagModel
}

// Close emits the text and usage of a step cut off before its assistant
// message (an interrupt or a timeout).
func (a *Adapter) Close(emit adapters.Emit) { a.flush(emit) }

// Verdict: the headless runner exits 0 when the task's turn completed and
// 1 otherwise (an API error after dsh's retries, ...); the turn's end
// gives the reason. An exit 0 without the turn's end fails too.
func (a *Adapter) Verdict(exit adapters.Exit) adapters.Verdict {
	switch {
	case exit.Signaled || exit.Code != 0:
		return adapters.Verdict{Failed: true, Detail: a.lastError}
	case !a.turnEnded:
		return adapters.Verdict{Failed: true, Detail: "dsh exited without ending its turn", Unfinished: true}
	case a.lastError != "":
		return adapters.Verdict{Failed: true, Detail: a.lastError}
	}
	return adapters.Verdict{}
}

// failure is the detail of a turn that did not complete, "" for one that
// did: dsh's own "CODE: message" for an error.
func failure(r *wireReason) string {
	switch {
	case r == nil:
		return "dsh ended the turn without a reason"
	case r.Kind == "completed":
		return ""
	case r.Kind == "error" && r.Error != nil:
		if r.Error.Code != "" {
			return r.Error.Code + ": " + r.Error.Message
		}
		if r.Error.Message != "" {
			return r.Error.Message
		}
	}
	return "dsh ended the turn: " + r.Kind
}

// textOf is the text of a message's content blocks (raw is part of a line
// that was decoded: valid JSON); none when a block has a field of an
// unexpected type (as when it was decoded with encoding/json, which
// reported it).
func (a *Adapter) textOf(raw json.RawMessage) string {
	var bs []wireBlock
	if len(raw) == 0 || raw[0] != '[' {
		return ""
	}
	a.dec.Reset(raw)
	if decodeBlocks(&a.dec, &bs) != nil || a.dec.Mismatch() {
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
