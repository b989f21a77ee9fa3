// Package records is what a runtime adapter produces from the runtime's raw
// output: runtime-neutral facts (a tool call started, a model call used so
// many tokens, ...) that the aggregator turns into schema-1 events. Records
// carry the runtime's own ids; a Parent of "" means the main agent.
package records

import "github.com/agentrun-dev/agentrun/events"

// Record is one fact from the runtime's output.
type Record interface{ isRecord() }

// Prompt is the prompt as the runtime echoed it (or as agentrun passed it
// when the runtime does not echo).
type Prompt struct {
	Text   string
	Images []string
}

// ToolStart is a tool call that started.
type ToolStart struct {
	ID, Parent, Name, Summary string
}

// ToolEnd is a tool call that ended. Name, Summary and Parent are used only
// when no ToolStart with this ID was seen (runtimes that report a call only
// when it ends).
type ToolEnd struct {
	ID     string
	Denied bool
	Error  *bool
	// Fallbacks for a call that had no ToolStart.
	Parent, Name, Summary string
}

// Text is a complete piece of agent text.
type Text struct {
	Parent, Text string
}

// PartialText is a piece of text the agent is writing, streamed before
// the complete Text. It produces no event: the live view shows it
// (events.Partial).
type PartialText struct {
	Parent, Text string
}

// CallStart marks the start of one model call. It produces no event; the
// runner counts the main agent's calls for --max-turns.
type CallStart struct {
	Parent, CallID string
}

// CallUsage is the usage so far of a model call that has not produced its
// Usage record yet. It produces no event; the runner counts it for
// --max-tokens.
type CallUsage struct {
	Parent, CallID string
	Counts         events.TokenCounts
}

// Usage is the final usage of one model call (or turn, or step).
type Usage struct {
	Parent, CallID string
	Model          string
	Counts         events.TokenCounts
}

// SubagentStart is a subagent started by the tool call ID.
type SubagentStart struct {
	ID, Parent, Kind, Model, Description string
}

// SubagentEnd is the end of the subagent started by the tool call ID.
type SubagentEnd struct {
	ID     string
	Failed bool
}

// Network is one decision of the filter proxy, or a summary of Suppressed
// decisions (see events.NetworkAccess).
type Network struct {
	Host       string
	Port       int
	Allowed    bool
	Reason     string
	Suppressed int
}

// Total is the runtime's own usage total for the whole run; the last one
// wins and replaces the sum of usage events in end.usage.
type Total struct {
	Usage events.Totals
}

// Result is the runtime's own final answer where it differs from the last
// text (dsh's final); without it end.result is the main agent's last text.
type Result struct {
	Text string
}

// Session is the runtime's session id.
type Session struct {
	ID string
}

func (Prompt) isRecord()        {}
func (ToolStart) isRecord()     {}
func (PartialText) isRecord()   {}
func (ToolEnd) isRecord()       {}
func (Text) isRecord()          {}
func (CallStart) isRecord()     {}
func (CallUsage) isRecord()     {}
func (Usage) isRecord()         {}
func (SubagentStart) isRecord() {}
func (SubagentEnd) isRecord()   {}
func (Network) isRecord()       {}
func (Total) isRecord()         {}
func (Result) isRecord()        {}
func (Session) isRecord()       {}
