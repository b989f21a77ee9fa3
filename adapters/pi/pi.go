// Package pi is the adapter for Mario Zechner's pi coding agent in
// `pi -p --mode json` mode (docs/runtimes.md for how it is started, docs/events.md's
// notes on pi; the README of testdata/real for what 0.73.1 really writes).
//
// pi echoes the prompt as its first user message, reports every model call
// with its model, usage and pi's own cost on the assistant message_end, and
// has no permission layer (denied is always false) and no subagents. It
// exits 0 when the model API fails: the failure is only the last assistant
// message's stopReason "error" with its errorMessage.
package pi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// Name is the runtime's name in flags, events and the API.
const Name = "pi"

func init() {
	adapters.Register(adapters.Runtime{Name: Name, BinaryEnv: "AGENTRUN_PI_BIN",
		New: func() adapters.Adapter { return New() }})
}

// Adapter holds the state of one run.
type Adapter struct {
	images   []string // --image paths as given, for the prompt event
	prompted bool

	calls     int             // assistant messages started, for call ids
	streaming bool            // an assistant message started and has not ended
	partial   strings.Builder // its text so far, owed as text if it never ends

	lastError  string // the failure of the last model call, "" when it succeeded
	agentEnded bool   // agent_end came after the last agent_start

	dec wirejson.Decoder // reused for every line
}

// New returns an adapter for one run.
func New() *Adapter { return &Adapter{} }

// updatePrefix starts the message_update lines: pi writes "type" first.
// They carry the whole message so far on every delta, so they are decoded
// into a struct that skips it.
var updatePrefix = []byte(`{"type":"message_update"`)

// Translate handles one line of `pi --mode json`.
func (a *Adapter) Translate(line []byte, emit adapters.Emit) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 || line[0] != '{' {
		return
	}
	if bytes.HasPrefix(line, updatePrefix) {
		// An update with a field of an unexpected type is dropped (as
		// when it was decoded with encoding/json, which reported it).
		var u updateLine
		if decodeUpdate(&a.dec, line, &u) == nil && !a.dec.Mismatch() {
			a.update(u.Event, emit)
		}
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
	case "session":
		if l.ID != "" {
			emit(records.Session{ID: l.ID})
		}
	case "agent_start":
		a.agentEnded = false
	case "agent_end":
		a.agentEnded = true
	case "message_start":
		if l.Message != nil && l.Message.Role == "assistant" {
			a.calls++
			a.streaming = true
			a.partial.Reset()
			emit(records.CallStart{CallID: a.callID()})
		}
	case "message_update":
		a.update(l.Event, emit)
	case "message_end":
		a.messageEnd(l.Message, emit)
	case "tool_execution_start":
		emit(records.ToolStart{ID: l.ToolCallID, Name: l.ToolName, Summary: summary(l.ToolName, a.toolArgs(l.Args))})
	case "tool_execution_end":
		var failed *bool
		if l.IsError != nil {
			failed = events.Bool(*l.IsError)
		}
		emit(records.ToolEnd{ID: l.ToolCallID, Error: failed, Name: l.ToolName, Summary: summary(l.ToolName, toolArgs{})})
	case "auto_retry_end":
		if l.Success != nil && !*l.Success && l.FinalError != "" {
			a.lastError = l.FinalError
		}
	}
}

func (a *Adapter) callID() string { return "pi-call-" + strconv.Itoa(a.calls) }

// update keeps the text of the assistant message being streamed, and
// hands each piece to the live view (records.PartialText).
func (a *Adapter) update(e *wireUpdate, emit adapters.Emit) {
	if e == nil || !a.streaming {
		return
	}
	switch e.Type {
	case "text_start":
		if a.partial.Len() > 0 {
			a.partial.WriteByte('\n')
			emit(records.PartialText{Text: "\n"})
		}
	case "text_delta":
		a.partial.WriteString(e.Delta)
		if e.Delta != "" {
			emit(records.PartialText{Text: e.Delta})
		}
	}
}

func (a *Adapter) messageEnd(m *wireMessage, emit adapters.Emit) {
	if m == nil {
		return
	}
	switch m.Role {
	case "user":
		if !a.prompted {
			a.prompted = true
			emit(records.Prompt{Text: stripImageRefs(a.textOf(m.Content)), Images: a.images})
		}
	case "assistant":
		a.streaming = false
		a.partial.Reset()
		for _, b := range a.blocks(m.Content) {
			if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
				emit(records.Text{Text: b.Text})
			}
		}
		failed := m.StopReason == "error" || m.StopReason == "aborted"
		if u := m.Usage; u != nil && !(failed && u.zero()) {
			// A failed call's zero usage is pi's placeholder: the API
			// served nothing.
			emit(records.Usage{CallID: a.callID(), Model: m.Model, Counts: u.counts()})
		}
		a.lastError = ""
		if failed {
			a.lastError = m.ErrorMessage
			if a.lastError == "" {
				a.lastError = "pi ended the model call with stopReason " + m.StopReason
			}
		}
	}
}

// Close emits the text of an assistant message cut off before its end
// (an interrupt or a timeout): it is what the agent had written.
func (a *Adapter) Close(emit adapters.Emit) {
	if a.streaming && strings.TrimSpace(a.partial.String()) != "" {
		emit(records.Text{Text: a.partial.String()})
	}
	a.streaming = false
	a.partial.Reset()
}

// Verdict: pi exits 0 when the model API fails, so the last model call
// decides: a call that ended in error (after pi's own retries) fails the
// run with pi's message. A non-zero exit fails too (130 after SIGINT; the
// runner reports an interrupt it caused itself).
func (a *Adapter) Verdict(exit adapters.Exit) adapters.Verdict {
	switch {
	case exit.Signaled || exit.Code != 0:
		return adapters.Verdict{Failed: true, Detail: a.lastError}
	case a.lastError != "":
		return adapters.Verdict{Failed: true, Detail: a.lastError}
	case !a.agentEnded:
		return adapters.Verdict{Failed: true, Detail: "pi exited without ending its agent loop", Unfinished: true}
	}
	return adapters.Verdict{}
}

// textOf is the text of a message's content: a string or text blocks
// (raw is part of a line that was decoded: valid JSON).
func (a *Adapter) textOf(raw json.RawMessage) string {
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

func (a *Adapter) blocks(raw json.RawMessage) []wireBlock {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var bs []wireBlock
	a.dec.Reset(raw)
	_ = decodeBlocks(&a.dec, &bs)
	return bs
}

// toolArgs reads the arguments of a tool call, when they are an object.
func (a *Adapter) toolArgs(raw json.RawMessage) toolArgs {
	var in toolArgs
	if len(raw) > 0 && raw[0] == '{' {
		a.dec.Reset(raw)
		_ = decodeToolArgs(&a.dec, &in)
	}
	return in
}

// stripImageRefs removes the references pi appends to the prompt for the
// image files agentrun attached (`<file name="…/agentrun-images/1.png">…
// </file>` lines): the prompt event lists the caller's paths, never the
// copies'.
func stripImageRefs(s string) string {
	for {
		i := strings.LastIndex(s, `<file name="`)
		if i < 0 || !strings.HasSuffix(s, "</file>\n") {
			return s
		}
		name, _, _ := strings.Cut(s[i+len(`<file name="`):], `"`)
		if !strings.Contains(name, "/"+adapters.ImageDir+"/") {
			return s
		}
		s = s[:i]
	}
}
