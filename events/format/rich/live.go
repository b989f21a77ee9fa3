package rich

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// RecentTexts is how many of the latest texts stay in their multi-line
// text form above the panel (docs/events.md, "The rich format").
const RecentTexts = 3

// Control sequences.
const (
	hideCursor = "\x1b[?25l"
	showCursor = "\x1b[?25h"
	clearDown  = "\x1b[J"
	dimOn      = "\x1b[2m"
	dimOff     = "\x1b[22m"
	newline    = "\r\n" // not only "\n": the tty may have ONLCR off
)

// block is one of the recent texts: the lines the text format shows for it
// and the scroll lines that came after it, up to the next text. It is drawn
// above the panel until it collapses into the scrollback.
type block struct {
	text  []text.Line
	after []text.Line
}

type subagent struct {
	id      string
	desc    string
	started time.Time
	context *int64
}

type openTool struct {
	agent   string // "" for main, else the subagent id
	summary string
	seq     uint64
}

// live draws the dynamic UI on a terminal. Every method takes mu: events,
// the redraw ticker and stderr lines come from different goroutines.
type live struct {
	mu      sync.Mutex
	out     io.Writer // the terminal
	errOut  io.Writer // stderr, for what comes after the panel is gone
	size    func() (width, height int)
	clock   Clock
	noColor bool
	f       *text.Formatter
	t0      time.Time

	pending  []text.Line // scroll lines not yet written to the scrollback
	blocks   []*block    // recent texts, oldest first
	subs     []*subagent // running subagents in start order
	subsSeen bool
	tools    map[string]*openTool // by tool id
	toolSeq  uint64
	total    events.TokenCounts
	mainCtx  *int64
	// writing is the text an agent is writing (events.Partial) since its
	// latest text, tool call or usage: the panel shows its last lines.
	writing *writing

	drawn  int  // rows of the live region on screen now
	hidden bool // the cursor is hidden
	ended  bool // the panel is gone for good
	errBuf []byte
	err    error // first write error

	stopTick func()
	stop     chan struct{}
	done     chan struct{}
}

func newLive(out, errOut io.Writer, size func() (int, int), clock Clock, noColor bool) *live {
	l := &live{
		out: out, errOut: errOut, size: size, clock: clock, noColor: noColor,
		f: text.NewFormatter(), t0: clock.Now(), tools: map[string]*openTool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	tick, stopTick := clock.Ticker(Frame)
	l.stopTick = stopTick
	go l.loop(tick)
	return l
}

func (l *live) loop(tick <-chan time.Time) {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		case <-tick:
			l.mu.Lock()
			if !l.ended {
				l.draw()
			}
			l.mu.Unlock()
		}
	}
}

func (l *live) note(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scroll(l.f.Note(s))
	return l.err
}

// partial adds a piece of the text an agent is writing; the next redraw
// (a tick) shows it.
func (l *live) partial(p events.Partial) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return l.err
	}
	agent := key(p.Parent)
	if l.writing == nil || l.writing.agent != agent {
		l.writing = &writing{agent: agent, label: l.f.Label(p.Parent)}
	}
	l.writing.add(p.Text)
	return l.err
}

// doneWriting ends what agent was writing: its text, a tool call or its
// usage came.
func (l *live) doneWriting(parent *string) {
	if l.writing != nil && l.writing.agent == key(parent) {
		l.writing = nil
	}
}

func (l *live) event(e events.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.f.Event(e)
	now := l.clock.Now()
	switch e := e.(type) {
	case *events.Text:
		l.doneWriting(e.Parent)
	case *events.ToolStart:
		l.doneWriting(e.Parent)
	case *events.Usage:
		l.doneWriting(e.Parent)
	case *events.SubagentEnd:
		id := e.ID
		l.doneWriting(&id)
	case *events.End:
		l.writing = nil
	}
	switch e := e.(type) {
	case *events.ToolStart:
		l.toolSeq++
		l.tools[e.ID] = &openTool{agent: key(e.Parent), summary: e.Summary, seq: l.toolSeq}
	case *events.Tool:
		delete(l.tools, e.ID)
	case *events.Usage:
		l.total.Add(e.Counts())
		if e.Parent == nil {
			l.mainCtx = e.ContextTokens
		} else if s := l.sub(*e.Parent); s != nil {
			s.context = e.ContextTokens
		}
	case *events.SubagentStart:
		l.subsSeen = true
		l.subs = append(l.subs, &subagent{id: e.ID, desc: e.Description, started: now})
	case *events.SubagentEnd:
		for i, s := range l.subs {
			if s.id == e.ID {
				l.subs = append(l.subs[:i], l.subs[i+1:]...)
				break
			}
		}
		for id, t := range l.tools {
			if t.agent == e.ID {
				delete(l.tools, id)
			}
		}
	case *events.Text:
		if l.ended {
			break
		}
		l.blocks = append(l.blocks, &block{text: lines})
		for len(l.blocks) > RecentTexts {
			l.collapse()
		}
		l.draw()
		return l.err
	case *events.End:
		if !l.ended {
			l.finish(lines)
			return l.err
		}
	}
	l.scroll(lines)
	return l.err
}

func key(parent *string) string {
	if parent == nil {
		return ""
	}
	return *parent
}

func (l *live) sub(id string) *subagent {
	for _, s := range l.subs {
		if s.id == id {
			return s
		}
	}
	return nil
}

// scroll adds lines to the scroll area and redraws at once.
func (l *live) scroll(lines []text.Line) {
	if len(lines) == 0 {
		return
	}
	if l.ended {
		var b strings.Builder
		for _, ln := range lines {
			b.WriteString(l.render(ln))
			b.WriteString(newline)
		}
		l.write(l.out, b.String())
		return
	}
	if n := len(l.blocks); n > 0 {
		l.blocks[n-1].after = append(l.blocks[n-1].after, lines...)
	} else {
		l.pending = append(l.pending, lines...)
	}
	l.draw()
}

// collapse moves the oldest recent text to the scrollback: its first line
// and the lines after it.
func (l *live) collapse() {
	b := l.blocks[0]
	l.blocks = l.blocks[1:]
	if len(b.text) > 0 {
		l.pending = append(l.pending, b.text[0])
	}
	l.pending = append(l.pending, b.after...)
}

// render is a scroll line as drawn: agent labels dim (unless NO_COLOR),
// tabs as four spaces, control characters dropped.
func (l *live) render(ln text.Line) string {
	if ln.Label == "" || !ln.Agent || l.noColor {
		return sanitize(ln.String())
	}
	s := dimOn + "[" + sanitize(ln.Label) + "]" + dimOff
	if ln.Text != "" {
		s += " " + sanitize(ln.Text)
	}
	return s
}

func plain(ln text.Line) string { return sanitize(ln.String()) }

func (l *live) termSize() (int, int) {
	w, h := l.size()
	if w <= 0 {
		w = 80
	}
	if h <= 0 {
		h = 24
	}
	return w, h
}

func (l *live) state() panelState {
	now := l.clock.Now()
	st := panelState{
		frame: int(now.Sub(l.t0) / Frame),
		main: agentRow{label: text.MainLabel, model: l.f.Model(nil), tool: l.currentTool(""),
			elapsed: now.Sub(l.t0), context: l.mainCtx},
		usage:    l.total,
		subsSeen: l.subsSeen,
	}
	if w := l.writing; w != nil {
		st.writing = &writingRow{label: w.label, chars: w.chars, lines: w.last(WritingLines)}
	}
	for _, s := range l.subs {
		id := s.id
		st.subs = append(st.subs, agentRow{label: l.f.Label(&id), model: l.f.Model(&id), desc: s.desc,
			tool: l.currentTool(id), elapsed: now.Sub(s.started), context: s.context})
	}
	return st
}

// currentTool is the summary of the agent's latest started tool that has
// not ended.
func (l *live) currentTool(agent string) string {
	var best *openTool
	for _, t := range l.tools {
		if t.agent == agent && (best == nil || t.seq > best.seq) {
			best = t
		}
	}
	if best == nil {
		return ""
	}
	return best.summary
}

// erase moves to the first row of the live region and clears to the end of
// the screen.
func (l *live) erase(b *strings.Builder) {
	if l.drawn == 0 {
		return
	}
	b.WriteString("\r")
	if l.drawn > 1 {
		b.WriteString("\x1b[" + strconv.Itoa(l.drawn-1) + "A")
	}
	b.WriteString(clearDown)
	l.drawn = 0
}

// draw writes the pending scroll lines and redraws the recent texts and the
// panel, in one write.
func (l *live) draw() {
	w, h := l.termSize()
	panel := panelLines(l.state(), w, h)
	blocks := make([][]string, len(l.blocks))
	for i, bl := range l.blocks {
		for _, ln := range bl.text {
			blocks[i] = append(blocks[i], plain(ln))
		}
		for _, ln := range bl.after {
			blocks[i] = append(blocks[i], plain(ln))
		}
	}
	for n := foldCount(blocks, len(panel), w, h); n > 0; n-- {
		l.collapse()
		blocks = blocks[1:]
	}

	var b strings.Builder
	l.erase(&b)
	if !l.hidden {
		b.WriteString(hideCursor)
		l.hidden = true
	}
	for _, ln := range l.pending {
		b.WriteString(l.render(ln))
		b.WriteString(newline)
	}
	l.pending = l.pending[:0]
	n := 0
	for i, bl := range l.blocks {
		for _, ln := range bl.text {
			b.WriteString(l.render(ln))
			b.WriteString(newline)
		}
		for _, ln := range bl.after {
			b.WriteString(l.render(ln))
			b.WriteString(newline)
		}
		n += blockRows(blocks[i], w)
	}
	for i, p := range panel {
		if i == 0 && !l.noColor {
			p = dimOn + p + dimOff
		}
		b.WriteString(p)
		if i < len(panel)-1 {
			b.WriteString(newline)
		}
	}
	l.drawn = n + len(panel)
	l.write(l.out, b.String())
}

// finish ends the dynamic UI: the panel is erased, the scroll lines and the
// remaining recent texts are written in full into the scrollback, then
// final (the [result] and end lines), and the cursor is shown again.
func (l *live) finish(final []text.Line) {
	if len(l.errBuf) > 0 {
		l.stderrLine(string(l.errBuf))
		l.errBuf = nil
	}
	var b strings.Builder
	l.erase(&b)
	lines := l.pending
	for _, bl := range l.blocks {
		lines = append(append(lines, bl.text...), bl.after...)
	}
	lines = append(lines, final...)
	for _, ln := range lines {
		b.WriteString(l.render(ln))
		b.WriteString(newline)
	}
	if l.hidden {
		b.WriteString(showCursor)
		l.hidden = false
	}
	l.pending, l.blocks = nil, nil
	l.ended = true
	l.write(l.out, b.String())
}

// stderrLine adds one line of stderr to the scroll area, without label or
// colour. The caller redraws.
func (l *live) stderrLine(s string) {
	s = strings.TrimSuffix(s, "\r")
	ln := text.Line{Text: s}
	if n := len(l.blocks); n > 0 {
		l.blocks[n-1].after = append(l.blocks[n-1].after, ln)
	} else {
		l.pending = append(l.pending, ln)
	}
}

// writeStderr takes bytes written to stderr: complete lines go into the
// scroll area, the incomplete last one waits for its newline or the end.
func (l *live) writeStderr(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return l.errOut.Write(p)
	}
	l.errBuf = append(l.errBuf, p...)
	added := false
	for {
		i := bytes.IndexByte(l.errBuf, '\n')
		if i < 0 {
			break
		}
		l.stderrLine(string(l.errBuf[:i]))
		l.errBuf = l.errBuf[i+1:]
		added = true
	}
	if len(l.errBuf) == 0 {
		l.errBuf = nil
	}
	if added {
		l.draw()
	}
	return len(p), nil
}

func (l *live) write(w io.Writer, s string) {
	if s == "" {
		return
	}
	if _, err := io.WriteString(w, s); err != nil && l.err == nil {
		l.err = err
	}
}

// close stops the redraws and, if no end event came, erases the panel and
// writes what is left; the cursor is shown again either way.
func (l *live) close() error {
	l.mu.Lock()
	select {
	case <-l.stop:
		l.mu.Unlock()
		return l.err
	default:
	}
	close(l.stop)
	l.mu.Unlock()
	<-l.done
	l.stopTick()

	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.finish(nil)
	}
	return l.err
}
