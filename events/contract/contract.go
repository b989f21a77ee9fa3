// Package contract checks a schema-1 event stream against the contract of
// docs/events.md: every line against the JSON Schema (package schema), then
// what a schema cannot say: the order of the fields, and the rules between
// events (start first and end last, every tool_start answered by one tool
// with the same id, parent, name and summary, parents that name a started
// subagent, subagents numbered from 1 in start order and ended before end,
// context_tokens as the sum of its parts).
//
// `agentrun validate` checks users' streams with it, and the tests of every
// producer (aggregator, adapters, the real CLIs through agentrun, fuzzing)
// check theirs through events/eventstest, so the contract is written down
// once.
package contract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/schema"
)

// FieldOrder is each event's top-level keys in the documented order
// (docs/events.md, "Events"), written out by hand (not derived from the Go
// types, so a reordered struct field is caught).
var FieldOrder = map[string][]string{
	"start":          {"schema", "type", "time", "runtime", "sandbox", "network", "deny_read", "model", "cwd", "argv", "env", "credentials", "trace_id"},
	"prompt":         {"schema", "type", "time", "text", "images"},
	"tool_start":     {"schema", "type", "time", "id", "parent", "name", "summary"},
	"tool":           {"schema", "type", "time", "id", "parent", "name", "summary", "denied", "error"},
	"text":           {"schema", "type", "time", "parent", "text"},
	"usage":          {"schema", "type", "time", "parent", "model", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "context_tokens"},
	"subagent_start": {"schema", "type", "time", "id", "parent", "number", "kind", "model", "description"},
	"subagent_end":   {"schema", "type", "time", "id", "status", "duration_ms", "usage"},
	"network":        {"schema", "type", "time", "host", "port", "allowed", "reason", "suppressed"},
	"end":            {"schema", "type", "time", "status", "exit_code", "detail", "duration_ms", "usage", "result", "session_id", "meter", "git"},
}

// Optional are the fields that are absent unless they apply (docs/events.md,
// "Null versus absent"): start.credentials without --credential,
// start.trace_id without telemetry, end.meter without a metered credential,
// end.git without --repo, network.suppressed but on a summary.
var Optional = map[string]bool{"start.credentials": true, "start.trace_id": true, "end.meter": true, "end.git": true, "network.suppressed": true}

// MeterOrder is the key order of end.meter; unmetered is absent unless a
// call went unmetered.
var MeterOrder = []string{"calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "matches", "unmetered"}

// UsageOrder is the key order of a usage total (subagent_end.usage,
// end.usage); its by_model entries have the first five.
var UsageOrder = []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "by_model"}

// Options says how strict a check is.
type Options struct {
	// Exact checks a stream of this agentrun: only the event types and the
	// fields it writes. Without it, what schema 1 may add passes: event
	// types it does not know (checked only for schema, type and time) and
	// fields it does not know (the known ones must still be in order).
	Exact bool
	// SchemaOnly checks every line against the JSON Schema and nothing
	// else: no field order, no rules between events.
	SchemaOnly bool
}

// Problem is one break of the contract. Line is the 1-based line it is
// about, 0 for the stream as a whole.
type Problem struct {
	Line    int
	Message string
}

func (p Problem) Error() string {
	if p.Line == 0 {
		return "stream: " + p.Message
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Message)
}

// Checker checks a stream line by line, keeping only what the rules
// between events need (running tools and subagents), so a stream of any
// length can be checked as it is read.
type Checker struct {
	o        Options
	problems []Problem
	line     int

	events    int    // lines that were events (JSON objects)
	firstType string // type of the first event
	firstLine int
	lastType  string
	lastLine  int
	endLine   int // the first end, 0 before it
	after     bool
	rejected  int // line of a rejected end

	subagents map[string]bool // started, running or ended
	ended     map[string]bool
	subLine   map[string]int
	openTools map[string]*openTool
	toolDone  map[string]bool
}

type openTool struct {
	line  int
	start *events.ToolStart
}

// New returns a Checker.
func New(o Options) *Checker {
	return &Checker{o: o, subagents: map[string]bool{}, ended: map[string]bool{}, subLine: map[string]int{},
		openTools: map[string]*openTool{}, toolDone: map[string]bool{}}
}

func (c *Checker) fail(line int, format string, args ...any) {
	c.problems = append(c.problems, Problem{Line: line, Message: fmt.Sprintf(format, args...)})
}

// Line checks the next line of the stream, without its newline.
func (c *Checker) Line(raw []byte) {
	c.line++
	n := c.line
	if len(bytes.TrimSpace(raw)) == 0 {
		c.fail(n, "empty line: every line is one event")
		return
	}
	keys, err := KeyOrder(raw)
	if err != nil {
		c.fail(n, "%v: %.80q", err, raw)
		return
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	what := head.Type
	if what == "" {
		what = "event"
	}
	bad := false
	for _, msg := range schema.Validate(raw) {
		c.fail(n, "%s %s", what, msg)
		bad = true
	}
	if c.o.SchemaOnly {
		return
	}
	c.sequence(n, head.Type)
	e, err := events.Decode(raw)
	if err != nil {
		if !bad {
			c.fail(n, "cannot decode: %v", err)
		}
		return
	}
	if e == nil {
		if c.o.Exact {
			c.fail(n, "unknown event type %q", head.Type)
		}
		return
	}
	c.order(n, head.Type, keys)
	c.rules(n, raw, e)
}

// sequence keeps start first and end last.
func (c *Checker) sequence(n int, typ string) {
	c.events++
	if c.events == 1 {
		c.firstType, c.firstLine = typ, n
	}
	c.lastType, c.lastLine = typ, n
	if c.endLine > 0 && !c.after {
		c.after = true
		c.fail(c.endLine, "end is not the last event (line %d follows it)", n)
	}
	switch {
	case typ == events.TypeStart && c.events > 1:
		c.fail(n, "start is not the first event")
	case typ == events.TypeEnd && c.endLine == 0:
		c.endLine = n
	}
}

// order checks the field order: exactly the documented keys, or, without
// Exact, the known keys in the documented order among others.
func (c *Checker) order(n int, typ string, keys []string) {
	var want []string
	for _, k := range FieldOrder[typ] {
		if !Optional[typ+"."+k] || slices.Contains(keys, k) {
			want = append(want, k)
		}
	}
	got := keys
	if !c.o.Exact {
		got = known(keys, want)
		want = known(want, keys)
	}
	if !slices.Equal(got, want) {
		c.fail(n, "%s fields %v, want %v", typ, keys, FieldOrder[typ])
	}
}

// known is the keys that are in set, in their order.
func known(keys, set []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if slices.Contains(set, k) {
			out = append(out, k)
		}
	}
	return out
}

func (c *Checker) rules(n int, raw []byte, e events.Event) {
	h := events.Head(e)
	if ts, err := time.Parse(events.TimeFormat, h.Time); err != nil || events.FormatTime(ts) != h.Time {
		c.fail(n, "time %q is not RFC 3339 UTC with milliseconds", h.Time)
	}
	checkParent := func(p *string) {
		if p != nil && !c.subagents[*p] {
			c.fail(n, "%s parent %q is not a started subagent", h.Type, *p)
		}
	}
	switch e := e.(type) {
	case *events.SubagentStart:
		checkParent(e.Parent)
		if c.subagents[e.ID] {
			c.fail(n, "subagent %s started twice", e.ID)
		}
		c.subagents[e.ID] = true
		c.subLine[e.ID] = n
		if e.Number != len(c.subagents) {
			c.fail(n, "subagent %s number %d, want %d (start order from 1)", e.ID, e.Number, len(c.subagents))
		}
		if strings.ContainsAny(e.Description, "\n\r") {
			c.fail(n, "subagent description is not one line")
		}
	case *events.SubagentEnd:
		if !c.subagents[e.ID] || c.ended[e.ID] {
			c.fail(n, "subagent_end %s without a start or twice", e.ID)
		}
		c.ended[e.ID] = true
		c.checkUsage(n, raw)
	case *events.ToolStart:
		checkParent(e.Parent)
		if c.openTools[e.ID] != nil || c.toolDone[e.ID] {
			c.fail(n, "tool_start %s twice", e.ID)
		}
		if c.subagents[e.ID] {
			c.fail(n, "tool_start for the call that started subagent %s", e.ID)
		}
		c.openTools[e.ID] = &openTool{line: n, start: e}
		checkSummary(c, n, e.Summary)
	case *events.Tool:
		ts := c.openTools[e.ID]
		switch {
		case c.toolDone[e.ID]:
			c.fail(n, "tool %s twice", e.ID)
		case ts == nil:
			c.fail(n, "tool %s without its tool_start", e.ID)
		case !reflect.DeepEqual(ts.start.Parent, e.Parent) || ts.start.Name != e.Name || ts.start.Summary != e.Summary:
			c.fail(n, "tool %s does not repeat its tool_start's parent, name and summary", e.ID)
		}
		delete(c.openTools, e.ID)
		c.toolDone[e.ID] = true
		if e.Denied && (e.Error == nil || *e.Error) {
			c.fail(n, "denied tool %s must have error false", e.ID)
		}
	case *events.Text:
		checkParent(e.Parent)
	case *events.Usage:
		checkParent(e.Parent)
		u := e.Counts()
		if !reflect.DeepEqual(u.Context(), e.ContextTokens) {
			c.fail(n, "context_tokens %s is not input_tokens + cache_read_tokens + cache_write_tokens", show(e.ContextTokens))
		}
	case *events.End:
		c.checkUsage(n, raw)
		c.checkMeter(n, raw)
		c.checkGit(n, raw)
		if e.Status == events.StatusRejected {
			c.rejected = n
		}
	}
}

func show(p *int64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

func checkSummary(c *Checker, n int, s string) {
	if strings.ContainsAny(s, "\n\r") || len([]rune(s)) > 120 {
		c.fail(n, "summary %q is not one line of at most 120 characters", s)
	}
}

// checkUsage checks the key order of a usage total and of its by_model
// entries.
func (c *Checker) checkUsage(n int, raw []byte) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		c.fail(n, "%v", err)
		return
	}
	keys, err := KeyOrder(obj["usage"])
	if err != nil {
		c.fail(n, "usage is not an object")
		return
	}
	if !c.keysInOrder(keys, UsageOrder) {
		c.fail(n, "usage fields %v, want %v", keys, UsageOrder)
	}
	var u struct {
		ByModel map[string]json.RawMessage `json:"by_model"`
	}
	_ = json.Unmarshal(obj["usage"], &u)
	if u.ByModel == nil {
		c.fail(n, "usage.by_model is null, want an object")
		return
	}
	models := make([]string, 0, len(u.ByModel))
	for m := range u.ByModel {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		keys, _ := KeyOrder(u.ByModel[m])
		if !c.keysInOrder(keys, UsageOrder[:5]) {
			c.fail(n, "usage.by_model[%s] fields %v, want %v", m, keys, UsageOrder[:5])
		}
	}
}

// checkMeter checks the key order of end.meter, when there is one.
func (c *Checker) checkMeter(n int, raw []byte) {
	var obj struct {
		Meter json.RawMessage `json:"meter"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Meter == nil {
		return
	}
	keys, err := KeyOrder(obj.Meter)
	if err != nil {
		c.fail(n, "meter is not an object")
		return
	}
	want := MeterOrder
	if !slices.Contains(keys, "unmetered") {
		want = MeterOrder[:len(MeterOrder)-1]
	}
	if !c.keysInOrder(keys, want) {
		c.fail(n, "meter fields %v, want %v", keys, want)
	}
}

// GitOrder is the key order of end.git.
var GitOrder = []string{"repository", "ref", "base_commit", "head_commit", "branch", "pushed", "patch", "commits", "files_changed", "insertions", "deletions", "paths", "detail"}

// checkGit checks the key order of end.git, when there is one.
func (c *Checker) checkGit(n int, raw []byte) {
	var obj struct {
		Git json.RawMessage `json:"git"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Git == nil {
		return
	}
	keys, err := KeyOrder(obj.Git)
	if err != nil {
		c.fail(n, "git is not an object")
		return
	}
	if !c.keysInOrder(keys, GitOrder) {
		c.fail(n, "git fields %v, want %v", keys, GitOrder)
	}
}

func (c *Checker) keysInOrder(keys, want []string) bool {
	if c.o.Exact {
		return slices.Equal(keys, want)
	}
	return slices.Equal(known(keys, want), known(want, keys))
}

// Finish checks what only the whole stream shows and returns every problem
// found, in line order.
func (c *Checker) Finish() []Problem {
	if !c.o.SchemaOnly {
		c.finish()
	}
	sort.SliceStable(c.problems, func(i, j int) bool { return c.problems[i].Line < c.problems[j].Line })
	return c.problems
}

func (c *Checker) finish() {
	switch {
	case c.line == 0:
		c.fail(0, "empty: a stream has at least an end event")
		return
	case c.events == 0:
		return
	case c.lastType != events.TypeEnd:
		c.fail(c.lastLine, "the last event is %s, not end", c.lastType)
	}
	if c.events > 1 && c.firstType != events.TypeStart {
		c.fail(c.firstLine, "the first event is %s, not start", c.firstType)
	}
	if c.rejected > 0 && c.events > 1 {
		c.fail(c.rejected, "a rejected run has no events but its end")
	}
	open := make([]*openTool, 0, len(c.openTools))
	for _, t := range c.openTools {
		open = append(open, t)
	}
	sort.Slice(open, func(i, j int) bool { return open[i].line < open[j].line })
	for _, t := range open {
		c.fail(t.line, "tool_start %s has no tool before end", t.start.ID)
	}
	var running []string
	for id := range c.subagents {
		if !c.ended[id] {
			running = append(running, id)
		}
	}
	sort.Slice(running, func(i, j int) bool { return c.subLine[running[i]] < c.subLine[running[j]] })
	for _, id := range running {
		c.fail(c.subLine[id], "subagent %s has no subagent_end before end", id)
	}
}

// Check checks a whole stream, one event per line.
func Check(stream []byte, o Options) []Problem {
	c := New(o)
	if len(stream) > 0 {
		for _, line := range bytes.Split(bytes.TrimSuffix(stream, []byte("\n")), []byte("\n")) {
			c.Line(line)
		}
	}
	return c.Finish()
}

// CheckReader checks the stream r holds, reading it line by line. The
// error is a read error; the problems are the stream's.
func CheckReader(r io.Reader, o Options) ([]Problem, error) {
	c := New(o)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			c.Line(bytes.TrimSuffix(line, []byte("\n")))
		}
		if errors.Is(err, io.EOF) {
			return c.Finish(), nil
		}
		if err != nil {
			return c.Finish(), err
		}
	}
}

// KeyOrder returns the top-level keys of a JSON object in order.
func KeyOrder(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return keys, err
	}
	if dec.More() {
		return keys, fmt.Errorf("more than one JSON value on the line")
	}
	return keys, nil
}
