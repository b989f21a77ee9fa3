// Package aggregator turns an adapter's records into the schema-1 event
// stream, applying every rule of docs/events.md that does not depend on the
// runtime: parents, subagent numbering, tool_start/tool pairing, usage sums
// and by-model totals, the events owed before end, and end itself.
package aggregator

import (
	"sort"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/recent"
)

// finishedWindow is how many finished tool, subagent and call ids are
// remembered to ignore late duplicates. State for running work is kept in
// full; finished work is forgotten beyond this window so memory stays flat
// however long the stream is. Duplicates arrive within a few lines.
const finishedWindow = 4096

// Sink receives each event as soon as it is final.
type Sink func(events.Event) error

// Aggregator is single-threaded: the runner feeds it from one goroutine.
type Aggregator struct {
	sink Sink
	now  func() time.Time
	// stamper formats each event's time, once a millisecond.
	stamper events.Stamper

	subagents     map[string]*subagent // running subagents
	endedSubs     *recent.Set
	subagentCount int // for numbering, from 1 in start order

	tools      map[string]*tool // running tool calls
	endedTools *recent.Set
	toolSeq    int // start order of tools, for the tool events owed at end

	usage        events.Totals  // sum of usage events
	runtimeTotal *events.Totals // the runtime's own total, when it gave one

	lastMainText *string
	result       *string
	sessionID    string

	mainCalls      int
	seenCalls      *recent.Set
	finishedTokens int64
	inflight       map[string]int64 // call id → tokens so far of calls without a Usage yet
	inflightTokens int64            // their sum
	finishedCalls  *recent.Set      // calls whose Usage is in: late CallUsage is ignored

	counters Counters
	err      error // first sink error; later events are dropped

	partial func(events.Partial) // OnPartial's; nil: partial text is dropped
}

// OnPartial hands every records.PartialText to f, as an events.Partial:
// the live view's, never the stream's. Text of a subagent the stream has
// not started is dropped.
func (a *Aggregator) OnPartial(f func(events.Partial)) { a.partial = f }

// Counters are the run's tallies, for the end summary in Kubernetes status:
// the events this aggregator wrote, counted by events.Counters.Count, the
// rule the live tracker applies to the same stream.
type Counters = events.Counters

type subagent struct {
	number  int
	parent  string
	started time.Time
	usage   events.Totals
}

type tool struct {
	seq   int
	start *events.ToolStart
}

// New returns an aggregator that writes to sink; now is the clock.
func New(sink Sink, now func() time.Time) *Aggregator {
	if now == nil {
		now = time.Now
	}
	return &Aggregator{
		sink:          sink,
		now:           now,
		subagents:     map[string]*subagent{},
		endedSubs:     recent.New(finishedWindow),
		tools:         map[string]*tool{},
		endedTools:    recent.New(finishedWindow),
		usage:         events.NewTotals(),
		seenCalls:     recent.New(finishedWindow),
		inflight:      map[string]int64{},
		finishedCalls: recent.New(finishedWindow),
	}
}

func (a *Aggregator) emit(typ string, e events.Event) {
	a.stamper.Stamp(e, typ, a.now())
	// Counted as written, so the counters are what the stream says.
	a.counters.Count(e)
	if a.err != nil {
		return
	}
	a.err = a.sink(e)
}

// Err returns the first error of the sink.
func (a *Aggregator) Err() error { return a.err }

// Start writes the start event. It must come first.
func (a *Aggregator) Start(s *events.Start) { a.emit(events.TypeStart, s) }

// parentOf maps a record's parent to the event's parent field.
func (a *Aggregator) parentOf(p string) *string {
	if p == "" {
		return nil
	}
	if _, ok := a.subagents[p]; !ok && !a.endedSubs.Has(p) {
		// A record names a subagent whose start we never saw (a truncated or
		// reordered stream). Synthesize the start so every parent in the
		// stream is a subagent_start id, as consumers rely on.
		a.startSubagent(records.SubagentStart{ID: p, Kind: "unknown"})
	}
	return events.String(p)
}

// Add turns one record into zero or more events.
func (a *Aggregator) Add(r records.Record) {
	switch r := r.(type) {
	case records.Prompt:
		images := r.Images
		if images == nil {
			images = []string{}
		}
		a.emit(events.TypePrompt, &events.Prompt{Text: r.Text, Images: images})
	case records.ToolStart:
		a.toolStart(r)
	case records.ToolEnd:
		a.toolEnd(r)
	case records.Text:
		if r.Parent == "" {
			t := r.Text
			a.lastMainText = &t
		}
		a.emit(events.TypeText, &events.Text{Parent: a.parentOf(r.Parent), Text: r.Text})
	case records.PartialText:
		if a.partial == nil || r.Text == "" {
			return
		}
		var parent *string
		if r.Parent != "" {
			if a.subagents[r.Parent] == nil {
				return
			}
			parent = events.String(r.Parent)
		}
		a.partial(events.Partial{Parent: parent, Text: r.Text})
	case records.CallStart:
		a.callStart(r.Parent, r.CallID)
	case records.CallUsage:
		a.callStart(r.Parent, r.CallID)
		if r.CallID != "" && !a.finishedCalls.Has(r.CallID) {
			n := r.Counts.Tokens()
			a.inflightTokens += n - a.inflight[r.CallID]
			a.inflight[r.CallID] = n
		}
	case records.Usage:
		a.addUsage(r)
	case records.SubagentStart:
		a.startSubagent(r)
	case records.SubagentEnd:
		a.endSubagent(r.ID, r.Failed)
	case records.Network:
		var reason *string
		if !r.Allowed {
			reason = events.String(r.Reason)
		}
		a.emit(events.TypeNetwork, &events.NetworkAccess{Host: r.Host, Port: r.Port, Allowed: r.Allowed, Reason: reason, Suppressed: r.Suppressed})
	case records.Total:
		t := r.Usage.Clone()
		a.runtimeTotal = &t
	case records.Result:
		t := r.Text
		a.result = &t
	case records.Session:
		a.sessionID = r.ID
	}
}

func (a *Aggregator) callStart(parent, id string) {
	if id != "" {
		if a.seenCalls.Has(id) {
			return
		}
		a.seenCalls.Add(id)
	}
	if parent == "" {
		a.mainCalls++
	}
}

func (a *Aggregator) toolStart(r records.ToolStart) {
	if _, dup := a.tools[r.ID]; dup || a.endedTools.Has(r.ID) {
		return
	}
	parent := a.parentOf(r.Parent) // may start a subagent with this very id
	if a.isSubagent(r.ID) {
		return
	}
	ts := &events.ToolStart{ID: r.ID, Parent: parent, Name: r.Name, Summary: r.Summary}
	a.toolSeq++
	a.tools[r.ID] = &tool{seq: a.toolSeq, start: ts}
	a.emit(events.TypeToolStart, ts)
}

func (a *Aggregator) toolEnd(r records.ToolEnd) {
	if a.isSubagent(r.ID) || a.endedTools.Has(r.ID) {
		// The call that started a subagent shows only as subagent events;
		// a tool ends once.
		return
	}
	t, ok := a.tools[r.ID]
	if !ok {
		a.toolStart(records.ToolStart{ID: r.ID, Parent: r.Parent, Name: r.Name, Summary: r.Summary})
		if t = a.tools[r.ID]; t == nil {
			return // the id turned out to be a subagent's
		}
	}
	errv := r.Error
	if r.Denied {
		// A denied call never ran, so it did not fail (docs/events.md, "tool").
		errv = events.Bool(false)
	}
	a.writeTool(t, r.Denied, errv)
}

func (a *Aggregator) writeTool(t *tool, denied bool, errv *bool) {
	delete(a.tools, t.start.ID)
	a.endedTools.Add(t.start.ID)
	a.emit(events.TypeTool, &events.Tool{ID: t.start.ID, Parent: t.start.Parent, Name: t.start.Name,
		Summary: t.start.Summary, Denied: denied, Error: errv})
}

func (a *Aggregator) startSubagent(r records.SubagentStart) {
	if r.Parent == r.ID {
		r.Parent = "" // a subagent cannot be its own parent
	}
	parent := a.parentOf(r.Parent)
	if a.isSubagent(r.ID) {
		return
	}
	a.subagentCount++
	s := &subagent{number: a.subagentCount, parent: r.Parent, started: a.now(), usage: events.NewTotals()}
	a.subagents[r.ID] = s
	a.emit(events.TypeSubagentStart, &events.SubagentStart{ID: r.ID, Parent: parent, Number: s.number, Kind: r.Kind,
		Model: events.StringOrNil(r.Model), Description: records.OneLine(r.Description)})
}

// isSubagent reports whether id started a subagent (running or finished).
func (a *Aggregator) isSubagent(id string) bool {
	_, running := a.subagents[id]
	return running || a.endedSubs.Has(id)
}

func (a *Aggregator) endSubagent(id string, failed bool) {
	s, ok := a.subagents[id]
	if !ok {
		return
	}
	delete(a.subagents, id)
	a.endedSubs.Add(id)
	status := events.SubagentFinished
	if failed {
		status = events.SubagentFailed
	}
	a.emit(events.TypeSubagentEnd, &events.SubagentEnd{ID: id, Status: status,
		DurationMs: a.now().Sub(s.started).Milliseconds(), Usage: s.usage.Clone()})
}

func (a *Aggregator) addUsage(r records.Usage) {
	if r.CallID != "" {
		a.callStart(r.Parent, r.CallID)
		a.inflightTokens -= a.inflight[r.CallID]
		delete(a.inflight, r.CallID)
		a.finishedCalls.Add(r.CallID)
	}
	// --max-tokens counts everything the call consumed and produced,
	// cached or not.
	a.finishedTokens += r.Counts.Tokens()
	parent := a.parentOf(r.Parent)
	a.usage.AddModel(r.Model, r.Counts)
	// A subagent's usage counts for it and for every running subagent
	// above it.
	for p := r.Parent; p != ""; {
		s, ok := a.subagents[p]
		if !ok {
			break
		}
		s.usage.AddModel(r.Model, r.Counts)
		p = s.parent
	}
	c := r.Counts
	a.emit(events.TypeUsage, &events.Usage{Parent: parent, Model: events.StringOrNil(r.Model),
		InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CacheReadTokens: c.CacheReadTokens,
		CacheWriteTokens: c.CacheWriteTokens, CostUSD: c.CostUSD, ContextTokens: c.Context()})
}

// MainCalls is the number of model calls the main agent started: what
// --max-turns counts.
func (a *Aggregator) MainCalls() int { return a.mainCalls }

// Tokens is every token of finished and running calls so far: what
// --max-tokens counts.
func (a *Aggregator) Tokens() int64 { return a.finishedTokens + a.inflightTokens }

// Counters returns the run's tallies so far.
func (a *Aggregator) Counters() Counters { return a.counters }

// Outcome is what the runner knows at the end of a run.
type Outcome struct {
	Status   string
	ExitCode *int
	Detail   string
	Started  time.Time // when agentrun began parsing its command line
	// SessionID is the id saved into --session-dir, or "" when nothing was
	// saved (end.session_id is then null even if the runtime had a session).
	SessionID string
	// Meter is the filter proxy's count of the model calls (nil without
	// credentials); Finish sets its Matches against end.usage.
	Meter *events.Meter
	// Git is the run's repository and change (nil without --repo).
	Git *events.Git
}

// Finish writes the tool and subagent_end events still owed, then end, and
// returns the end event.
func (a *Aggregator) Finish(o Outcome) *events.End {
	pending := make([]*tool, 0, len(a.tools))
	for _, t := range a.tools {
		pending = append(pending, t)
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i].seq < pending[j].seq })
	for _, t := range pending {
		a.writeTool(t, false, nil)
	}
	// Subagents still running end as failed, in start order.
	running := make([]string, 0, len(a.subagents))
	for id := range a.subagents {
		running = append(running, id)
	}
	sort.Slice(running, func(i, j int) bool { return a.subagents[running[i]].number < a.subagents[running[j]].number })
	for _, id := range running {
		a.endSubagent(id, true)
	}
	total := a.usage
	if a.runtimeTotal != nil {
		total = *a.runtimeTotal
	}
	result := a.result
	if result == nil {
		result = a.lastMainText
	}
	end := &events.End{Status: o.Status, ExitCode: o.ExitCode, Detail: o.Detail,
		Usage: total.Clone(), Result: result, SessionID: events.StringOrNil(o.SessionID)}
	if !o.Started.IsZero() {
		end.DurationMs = a.now().Sub(o.Started).Milliseconds()
	}
	end.Git = o.Git
	if o.Meter != nil {
		m := *o.Meter
		m.Matches = meterMatches(m, end.Usage.TokenCounts)
		end.Meter = &m
	}
	a.emit(events.TypeEnd, end)
	return end
}

// meterMatches compares the metered counts with the reported ones, a null
// report counting as 0; with a call the meter could not count, the report
// cannot be confirmed.
func meterMatches(m events.Meter, u events.TokenCounts) bool {
	if m.Unmetered > 0 {
		return false
	}
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return m.InputTokens == v(u.InputTokens) && m.OutputTokens == v(u.OutputTokens) &&
		m.CacheReadTokens == v(u.CacheReadTokens) && m.CacheWriteTokens == v(u.CacheWriteTokens)
}

// SessionID is the runtime's own session id, if it reported one.
func (a *Aggregator) SessionID() string { return a.sessionID }
