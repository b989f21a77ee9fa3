package ui

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// item is one entry of a run's timeline, made from one event of its
// stream (docs/events.md). The page nests an item under the subagent
// whose id is its Parent, and a tool's end updates the item of its
// start (the same ID).
type item struct {
	// Seq numbers the events of the log from 1: a page that reconnects
	// is sent the log from its start again and skips what it has.
	Seq  int    `json:"seq"`
	Kind string `json:"kind"`
	// Time is the event's time, Unix milliseconds.
	Time   int64  `json:"time"`
	ID     string `json:"id,omitempty"`
	Parent string `json:"parent,omitempty"`
	// Agent is the label of the agent it belongs to (main, explore#1).
	Agent string `json:"agent"`
	Title string `json:"title"`
	// Body is longer text shown under the title: a text event's text, the
	// prompt, the result.
	Body string `json:"body,omitempty"`
	// State is a tool's (running, ok, error, denied, unknown), a
	// subagent's (running, finished, failed), a network decision's
	// (allowed, denied) or the end status.
	State string `json:"state,omitempty"`
	// Detail is a second line: usage, a refusal's reason, an end's detail.
	Detail string `json:"detail,omitempty"`
	// Alert marks what a person should see: a denied connection, a
	// failed or denied tool, a failed subagent, an end that did not
	// finish.
	Alert bool `json:"alert,omitempty"`
}

// Kinds of items.
const (
	kindStart    = "start"
	kindPrompt   = "prompt"
	kindText     = "text"
	kindTool     = "tool"
	kindUsage    = "usage"
	kindSubagent = "subagent"
	kindNetwork  = "network"
	kindEnd      = "end"
	kindNote     = "note"
)

// timeline makes items of a run's events in order. It keeps the text
// format's Formatter, so that agents have the labels and models that
// `kubectl agentrun logs` shows.
type timeline struct {
	f   *text.Formatter
	seq int
}

func newTimeline() *timeline { return &timeline{f: text.NewFormatter()} }

// item is the entry of e, and false for events the timeline does not
// show on their own.
func (t *timeline) item(e events.Event) (item, bool) {
	t.seq++
	t.f.Event(e) // labels and models, as the text format keeps them
	it := item{Seq: t.seq, Time: eventTime(events.Head(e).Time)}
	switch e := e.(type) {
	case *events.Start:
		it.Kind, it.Agent = kindStart, text.MainLabel
		it.Title = inert(startTitle(e))
		if len(e.DenyRead) > 0 {
			it.Detail = inert("unreadable: " + strings.Join(e.DenyRead, ", "))
		}
	case *events.Prompt:
		it.Kind, it.Agent = kindPrompt, text.MainLabel
		it.Body = inert(e.Text)
		if n := len(e.Images); n > 0 {
			it.Detail = inert(plural(int64(n), "image", "images") + ": " + strings.Join(e.Images, ", "))
		}
	case *events.Text:
		it.Kind, it.Parent, it.Agent = kindText, str(e.Parent), t.f.Label(e.Parent)
		it.Body = inert(e.Text)
	case *events.ToolStart:
		it.Kind, it.ID, it.Parent, it.Agent = kindTool, e.ID, str(e.Parent), t.f.Label(e.Parent)
		it.Title, it.State = inert(e.Summary), "running"
	case *events.Tool:
		it.Kind, it.ID, it.Parent, it.Agent = kindTool, e.ID, str(e.Parent), t.f.Label(e.Parent)
		it.Title = inert(e.Summary)
		switch {
		case e.Denied:
			it.State, it.Alert, it.Detail = "denied", true, "the runtime's permission check refused the call"
		case e.Error == nil:
			it.State = "unknown"
		case *e.Error:
			it.State, it.Alert, it.Detail = "error", true, "the call failed"
		default:
			it.State = "ok"
		}
	case *events.Usage:
		it.Kind, it.Parent, it.Agent = kindUsage, str(e.Parent), t.f.Label(e.Parent)
		it.Title = inert(orDefault(str(e.Model), "model call"))
		it.Detail = usageWords(e.Counts())
	case *events.SubagentStart:
		it.Kind, it.ID, it.Parent, it.Agent = kindSubagent, e.ID, str(e.Parent), t.f.Label(e.Parent)
		id := e.ID
		it.Title = inert(t.f.Label(&id))
		if m := str(e.Model); m != "" {
			it.Title += inert(" (" + m + ")")
		}
		it.Body, it.State = inert(e.Description), "running"
	case *events.SubagentEnd:
		id := e.ID
		it.Kind, it.ID, it.Agent = kindSubagent, e.ID, t.f.Label(&id)
		it.Title = inert(t.f.Label(&id))
		if m := t.f.Model(&id); m != "" {
			it.Title += inert(" (" + m + ")")
		}
		it.State = inert(e.Status)
		it.Alert = e.Status != events.SubagentFinished
		it.Detail = text.JoinItems(text.FormatSeconds(e.DurationMs), usageWords(e.Usage.TokenCounts))
	case *events.NetworkAccess:
		it.Kind, it.Agent = kindNetwork, text.MainLabel
		it.Title = inert(net.JoinHostPort(e.Host, strconv.Itoa(e.Port)))
		if e.Allowed {
			it.State = "allowed"
		} else {
			it.State, it.Alert = "denied", true
			it.Detail = inert(orDefault(str(e.Reason), "refused"))
			if e.Suppressed > 1 {
				it.Detail += " and " + strconv.Itoa(e.Suppressed-1) + " more like it"
			}
		}
	case *events.End:
		it.Kind, it.Agent, it.State = kindEnd, "end", inert(e.Status)
		it.Title = inert(e.Status) + " after " + text.FormatSeconds(e.DurationMs)
		cost := ""
		if e.Usage.CostUSD != nil {
			cost = text.FormatCost(*e.Usage.CostUSD)
		}
		it.Detail = text.JoinItems(usageWords(e.Usage.TokenCounts), cost, inert(text.OneLine(e.Detail)))
		if e.Result != nil {
			it.Body = inert(*e.Result)
		}
		it.Alert = e.Status != events.StatusFinished
	default:
		return it, false
	}
	it.Agent = inert(it.Agent) // a subagent's label has its kind, as the agent named it
	return it, true
}

// note is an item that is not an event: where the follower waits, a
// line that is not an event.
func (t *timeline) note(msg string) item {
	return item{Kind: kindNote, Agent: "note", Title: inert(msg), Time: time.Now().UnixMilli()}
}

// startTitle says how the agent was started: runtime, model, sandbox and
// network.
func startTitle(e *events.Start) string {
	s := e.Runtime
	if m := str(e.Model); m != "" {
		s += " (" + m + ")"
	}
	s += " started, sandbox " + e.Sandbox + ", network " + e.Network.Mode
	if len(e.Network.Allow) > 0 {
		s += " (" + strings.Join(e.Network.Allow, ", ") + ")"
	}
	if !e.Network.Enforced {
		s += ", not enforced"
	}
	return s
}

// usageWords is the text format's usage string ("in 14.1k  out 85
// cached 69%").
func usageWords(c events.TokenCounts) string { return text.FormatUsage(c) }

func eventTime(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
