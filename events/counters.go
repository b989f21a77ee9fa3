package events

// Counters are a run's tallies: the end summary's, the live progress's and
// status.counters. They are counted from the event stream itself, by
// Count, so the runner (which counts the events it writes), the events
// sidecar (which counts the events it reads) and every reader of a stream
// get the same numbers at every point of the run.
type Counters struct {
	Tools             int `json:"tools"`
	ToolErrors        int `json:"toolErrors"`
	Denials           int `json:"denials"`
	Subagents         int `json:"subagents"`
	DeniedConnections int `json:"deniedConnections"`
}

// Count adds what one event counts for: a tool event is a tool call
// (denied, or failed, or neither), a subagent_start a subagent, and a
// refused network decision its connections: one, or on a summary of
// decisions the proxy stopped reporting one by one, its suppressed count
// (docs/events.md, "network"). Other events count for nothing.
func (c *Counters) Count(e Event) {
	switch e := e.(type) {
	case *Tool:
		c.Tools++
		if e.Denied {
			c.Denials++
		}
		if e.Error != nil && *e.Error {
			c.ToolErrors++
		}
	case *SubagentStart:
		c.Subagents++
	case *NetworkAccess:
		if !e.Allowed {
			c.DeniedConnections += max(1, e.Suppressed)
		}
	}
}
