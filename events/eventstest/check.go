// Package eventstest checks a schema-1 stream against the contract of seed
// 003. Tests of every producer (aggregator, adapters, the real CLIs through
// agentrun, fuzzing) use it, so the contract is written down once.
package eventstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/events"
)

// SeedFieldOrder is each event's top-level keys in the order of seed 003's
// type definitions, written out by hand (not derived from the Go types, so a
// reordered struct field is caught).
var SeedFieldOrder = map[string][]string{
	"start":          {"schema", "type", "time", "runtime", "sandbox", "network", "deny_read", "model", "cwd", "argv", "env"},
	"prompt":         {"schema", "type", "time", "text", "images"},
	"tool_start":     {"schema", "type", "time", "id", "parent", "name", "summary"},
	"tool":           {"schema", "type", "time", "id", "parent", "name", "summary", "denied", "error"},
	"text":           {"schema", "type", "time", "parent", "text"},
	"usage":          {"schema", "type", "time", "parent", "model", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "context_tokens"},
	"subagent_start": {"schema", "type", "time", "id", "parent", "number", "kind", "model", "description"},
	"subagent_end":   {"schema", "type", "time", "id", "status", "duration_ms", "usage"},
	"network":        {"schema", "type", "time", "host", "port", "allowed", "reason"},
	"end":            {"schema", "type", "time", "status", "exit_code", "detail", "duration_ms", "usage", "result", "session_id"},
}

var usageOrder = []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "by_model"}

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
	return keys, nil
}

// Check validates a whole stream (one event per line) and returns every
// violation found; nil means the stream keeps the contract.
func Check(stream []byte) []error {
	var errs []error
	fail := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...)))
	}
	lines := bytes.Split(bytes.TrimSuffix(stream, []byte("\n")), []byte("\n"))
	if len(stream) == 0 {
		return []error{fmt.Errorf("empty stream: there must be at least an end event")}
	}
	subagents := map[string]bool{}
	openTools := map[string]*events.ToolStart{}
	var toolOrder []string
	ended := map[string]bool{}
	var types []string
	for i, raw := range lines {
		n := i + 1
		keys, err := KeyOrder(raw)
		if err != nil {
			fail(n, "%v: %.80s", err, raw)
			continue
		}
		e, err := events.Decode(raw)
		if err != nil || e == nil {
			fail(n, "cannot decode: %v", err)
			continue
		}
		h := events.Head(e)
		types = append(types, h.Type)
		if want := SeedFieldOrder[h.Type]; !reflect.DeepEqual(keys, want) {
			fail(n, "%s keys %v, want %v", h.Type, keys, want)
		}
		if ts, err := time.Parse(events.TimeFormat, h.Time); err != nil || events.FormatTime(ts) != h.Time {
			fail(n, "time %q is not RFC 3339 UTC with milliseconds", h.Time)
		}
		checkParent := func(p *string) {
			if p != nil && !subagents[*p] {
				fail(n, "%s parent %q is not a started subagent", h.Type, *p)
			}
		}
		switch e := e.(type) {
		case *events.SubagentStart:
			checkParent(e.Parent)
			if subagents[e.ID] {
				fail(n, "subagent %s started twice", e.ID)
			}
			subagents[e.ID] = true
			if e.Number != len(subagents) {
				fail(n, "subagent %s number %d, want %d (start order from 1)", e.ID, e.Number, len(subagents))
			}
			if strings.ContainsAny(e.Description, "\n\r") {
				fail(n, "subagent description is not one line")
			}
		case *events.SubagentEnd:
			if !subagents[e.ID] || ended[e.ID] {
				fail(n, "subagent_end %s without a start or twice", e.ID)
			}
			ended[e.ID] = true
			errs = append(errs, checkUsage(n, raw, "usage")...)
		case *events.ToolStart:
			checkParent(e.Parent)
			if _, dup := openTools[e.ID]; dup {
				fail(n, "tool_start %s twice", e.ID)
			}
			if subagents[e.ID] {
				fail(n, "tool_start for the call that started subagent %s", e.ID)
			}
			openTools[e.ID] = e
			toolOrder = append(toolOrder, e.ID)
			checkSummary(n, e.Summary, fail)
		case *events.Tool:
			ts, ok := openTools[e.ID]
			switch {
			case !ok:
				fail(n, "tool %s without its tool_start", e.ID)
			case ts == nil:
				fail(n, "tool %s twice", e.ID)
			case !reflect.DeepEqual(ts.Parent, e.Parent) || ts.Name != e.Name || ts.Summary != e.Summary:
				fail(n, "tool %s does not repeat its tool_start's parent, name and summary", e.ID)
			}
			openTools[e.ID] = nil
			if e.Denied && (e.Error == nil || *e.Error) {
				fail(n, "denied tool %s must have error false", e.ID)
			}
		case *events.Text:
			checkParent(e.Parent)
		case *events.Usage:
			checkParent(e.Parent)
			c := e.Counts()
			if !reflect.DeepEqual(c.Context(), e.ContextTokens) {
				fail(n, "context_tokens %v is not input+cache_read+cache_write", e.ContextTokens)
			}
		case *events.End:
			errs = append(errs, checkUsage(n, raw, "usage")...)
		}
	}
	last := len(types) - 1
	switch {
	case last < 0:
	case types[last] != "end":
		errs = append(errs, fmt.Errorf("the last event is %s, not end", types[last]))
	case last > 0 && types[0] != "start":
		errs = append(errs, fmt.Errorf("the first event is %s, not start", types[0]))
	}
	for i, t := range types[:max(last, 0)] {
		if t == "end" {
			errs = append(errs, fmt.Errorf("line %d: end before the last line", i+1))
		}
		if t == "start" && i > 0 {
			errs = append(errs, fmt.Errorf("line %d: start is not first", i+1))
		}
	}
	for _, id := range toolOrder {
		if openTools[id] != nil {
			errs = append(errs, fmt.Errorf("tool_start %s has no tool before end", id))
		}
	}
	for id := range subagents {
		if !ended[id] {
			errs = append(errs, fmt.Errorf("subagent %s has no subagent_end before end", id))
		}
	}
	return errs
}

func checkSummary(n int, s string, fail func(int, string, ...any)) {
	if strings.ContainsAny(s, "\n\r") || len([]rune(s)) > 120 {
		fail(n, "summary %q is not one line of at most 120 characters", s)
	}
}

// checkUsage checks the key order of a Usage object and its by_model entries.
func checkUsage(n int, raw []byte, field string) []error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return []error{fmt.Errorf("line %d: %v", n, err)}
	}
	keys, err := KeyOrder(obj[field])
	if err != nil || !reflect.DeepEqual(keys, usageOrder) {
		return []error{fmt.Errorf("line %d: %s keys %v, want %v", n, field, keys, usageOrder)}
	}
	var u struct {
		ByModel map[string]json.RawMessage `json:"by_model"`
	}
	_ = json.Unmarshal(obj[field], &u)
	if u.ByModel == nil {
		return []error{fmt.Errorf("line %d: by_model is null, want an object", n)}
	}
	for model, m := range u.ByModel {
		keys, _ := KeyOrder(m)
		if !reflect.DeepEqual(keys, usageOrder[:5]) {
			return []error{fmt.Errorf("line %d: by_model[%s] keys %v", n, model, keys)}
		}
	}
	return nil
}

// Find returns the first event of type T in evs, or the zero T.
func Find[T events.Event](evs []events.Event) T {
	for _, e := range evs {
		if x, ok := e.(T); ok {
			return x
		}
	}
	var zero T
	return zero
}
