package progress

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// Tracker builds the document from the event stream, one line at a time.
// It is safe for concurrent use: the sidecar feeds it from its follower and
// serves it from HTTP handlers.
type Tracker struct {
	mu      sync.Mutex
	doc     Doc
	fmt     *text.Formatter
	running map[string]string // tool calls started and not ended: id → their line
	order   []string          // running tool ids in start order
	changed chan struct{}     // closed and replaced on every change
}

// NewTracker returns a tracker with an empty document.
func NewTracker() *Tracker {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Tracker{
		doc:     Doc{V: Version, Boot: hex.EncodeToString(b[:]), Usage: events.NewTotals()},
		fmt:     text.NewFormatter(),
		running: map[string]string{},
		changed: make(chan struct{}),
	}
}

// Line takes one line of the event stream (without its newline). Lines that
// are not schema-1 events, and types the stream may gain later, change
// nothing.
func (t *Tracker) Line(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	e, err := events.Decode(line)
	if err != nil || e == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.event(e)
	t.doc.LastEvent = events.Head(e).Time
	t.bump()
}

// event applies one event; the caller holds the lock.
func (t *Tracker) event(e events.Event) {
	d := &t.doc
	lines := t.fmt.Event(e)
	// The counters follow the stream's one counting rule, the runner's.
	d.Counters.Count(e)
	switch e := e.(type) {
	case *events.Usage:
		d.Usage.AddModel(deref(e.Model), e.Counts())
		d.ModelCalls++
	case *events.ToolStart:
		d.ToolCalls++
		// The text format shows a call once, when it ends; while it runs,
		// the activity is the line it will get.
		l := text.Line{Label: t.fmt.Label(e.Parent), Agent: true, Text: "tool " + e.Summary}.String()
		t.running[e.ID] = l
		t.order = append(t.order, e.ID)
		d.Activity = cut(l, MaxActivity)
		return
	case *events.Tool:
		t.endTool(e.ID)
	case *events.End:
		d.Usage = e.Usage.Clone()
		if d.Usage.ByModel == nil {
			d.Usage.ByModel = map[string]events.TokenCounts{}
		}
		d.Ended = true
		t.running, t.order = map[string]string{}, nil
		for _, l := range lines {
			if l.Label == "end" {
				d.Activity = cut(l.String(), MaxActivity)
			}
		}
		return
	}
	if len(lines) > 0 {
		d.Activity = cut(lines[0].String(), MaxActivity)
	} else if len(t.order) > 0 {
		// An event the text format does not show (usage) while a call
		// still runs: that call is what the agent is doing.
		d.Activity = cut(t.running[t.order[len(t.order)-1]], MaxActivity)
	}
}

func (t *Tracker) endTool(id string) {
	if _, ok := t.running[id]; !ok {
		return
	}
	delete(t.running, id)
	for i, o := range t.order {
		if o == id {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
}

// SetMeter records the proxy's count so far; an unchanged count changes
// nothing.
func (t *Tracker) SetMeter(m Meter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.doc.Meter != nil && *t.doc.Meter == m {
		return
	}
	t.doc.Meter = &m
	t.bump()
}

// bump marks a change and wakes the waiting readers; the caller holds the
// lock.
func (t *Tracker) bump() {
	t.doc.Version++
	close(t.changed)
	t.changed = make(chan struct{})
}

// Snapshot returns a copy of the document and a channel that is closed at
// its next change.
func (t *Tracker) Snapshot() (Doc, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.doc
	// The tracker keeps every model (the largest may change); the
	// document carries the largest MaxModels, so a run of many models
	// still gets a document the reader accepts.
	d.Usage, d.ByModelCut = t.doc.Usage.Bounded(MaxModels)
	if t.doc.Meter != nil {
		m := *t.doc.Meter
		d.Meter = &m
	}
	return d, t.changed
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
