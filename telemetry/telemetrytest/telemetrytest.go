// Package telemetrytest reads back what a run exported (the OpenTelemetry
// Collector's file exporter output, or the SDK's in-memory spans) and
// checks it against the run's event stream: the span tree is the event
// tree, the chat spans add up to end.usage, the times are the events'.
package telemetrytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/events"
)

// Span is one exported span, as a test sees it.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      string
	Start, End                time.Time
	Attrs                     map[string]any // string, int64, float64 or bool
	Events                    []Event
	Status                    string // "", "Ok" or "Error"
	Service                   string // the resource's service.name
	Resource                  map[string]any
}

// Event is a span event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Str is a string attribute ("" when absent).
func (s Span) Str(k string) string { v, _ := s.Attrs[k].(string); return v }

// Int is an integer attribute and whether it is there.
func (s Span) Int(k string) (int64, bool) { v, ok := s.Attrs[k].(int64); return v, ok }

// Metric is one exported data point set of a metric, as a test sees it.
type Metric struct {
	Name   string
	Points []Point
}

// Point is one data point: a sum's value, or a histogram's count and sum.
type Point struct {
	Attrs map[string]any
	Value float64
	Count uint64
}

// ReadCollectorFile reads the file exporter's output (one OTLP/JSON export
// request per line, a line being written left out) and returns its spans
// and metrics.
func ReadCollectorFile(path string) ([]Span, []Metric, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	// The collector may be writing the last line: read complete lines only.
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var spans []Span
	var metrics []Metric
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req otlpFile
		if err := json.Unmarshal(line, &req); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, rs := range req.ResourceSpans {
			res := attrMap(rs.Resource.Attributes)
			service, _ := res["service.name"].(string)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := Span{TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentSpanID, Name: s.Name, Kind: kindName(s.Kind),
						Start: nanos(s.StartTimeUnixNano), End: nanos(s.EndTimeUnixNano), Attrs: attrMap(s.Attributes),
						Status: statusName(s.Status.Code), Service: service, Resource: res}
					for _, e := range s.Events {
						sp.Events = append(sp.Events, Event{Name: e.Name, Time: nanos(e.TimeUnixNano), Attrs: attrMap(e.Attributes)})
					}
					spans = append(spans, sp)
				}
			}
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					mt := Metric{Name: m.Name}
					for _, dp := range append(m.Sum.DataPoints, m.Gauge.DataPoints...) {
						v := dp.AsDouble
						if dp.AsInt != "" {
							n, _ := strconv.ParseInt(dp.AsInt, 10, 64)
							v = float64(n)
						}
						mt.Points = append(mt.Points, Point{Attrs: attrMap(dp.Attributes), Value: v})
					}
					for _, dp := range m.Histogram.DataPoints {
						c, _ := strconv.ParseUint(dp.Count, 10, 64)
						mt.Points = append(mt.Points, Point{Attrs: attrMap(dp.Attributes), Value: dp.Sum, Count: c})
					}
					metrics = append(metrics, mt)
				}
			}
		}
	}
	return spans, metrics, sc.Err()
}

type otlpFile struct {
	ResourceSpans []struct {
		Resource   struct{ Attributes []kv } `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID           string `json:"traceId"`
				SpanID            string `json:"spanId"`
				ParentSpanID      string `json:"parentSpanId"`
				Name              string `json:"name"`
				Kind              int    `json:"kind"`
				StartTimeUnixNano string `json:"startTimeUnixNano"`
				EndTimeUnixNano   string `json:"endTimeUnixNano"`
				Attributes        []kv   `json:"attributes"`
				Events            []struct {
					TimeUnixNano string `json:"timeUnixNano"`
					Name         string `json:"name"`
					Attributes   []kv   `json:"attributes"`
				} `json:"events"`
				Status struct {
					Code int `json:"code"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
	ResourceMetrics []struct {
		ScopeMetrics []struct {
			Metrics []struct {
				Name      string                    `json:"name"`
				Sum       struct{ DataPoints []dp } `json:"sum"`
				Gauge     struct{ DataPoints []dp } `json:"gauge"`
				Histogram struct {
					DataPoints []struct {
						Attributes []kv    `json:"attributes"`
						Count      string  `json:"count"`
						Sum        float64 `json:"sum"`
					} `json:"dataPoints"`
				} `json:"histogram"`
			} `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

type dp struct {
	Attributes []kv    `json:"attributes"`
	AsInt      string  `json:"asInt"`
	AsDouble   float64 `json:"asDouble"`
}

type kv struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string  `json:"stringValue"`
		IntValue    *string  `json:"intValue"`
		DoubleValue *float64 `json:"doubleValue"`
		BoolValue   *bool    `json:"boolValue"`
	} `json:"value"`
}

func attrMap(kvs []kv) map[string]any {
	m := map[string]any{}
	for _, a := range kvs {
		switch v := a.Value; {
		case v.StringValue != nil:
			m[a.Key] = *v.StringValue
		case v.IntValue != nil:
			n, _ := strconv.ParseInt(*v.IntValue, 10, 64)
			m[a.Key] = n
		case v.DoubleValue != nil:
			m[a.Key] = *v.DoubleValue
		case v.BoolValue != nil:
			m[a.Key] = *v.BoolValue
		}
	}
	return m
}

func nanos(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n).UTC()
}

func kindName(k int) string {
	return [...]string{"Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"}[min(max(k, 0), 5)]
}

func statusName(c int) string {
	switch c {
	case 1:
		return "Ok"
	case 2:
		return "Error"
	}
	return ""
}

// Trace is the spans of one trace id.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Check compares a run's spans (one trace) with its event stream and
// returns every difference:
//   - one root invoke_agent span, whose parent is parentSpanID ("" for a new
//     trace), from start's time to end's, with the end's status, tokens and
//     cost;
//   - one invoke_agent span per subagent_start, under the span of its
//     parent (the root for null), from subagent_start to subagent_end;
//   - one execute_tool span per tool call, under its agent's span, from
//     tool_start to tool, with the tool's flags;
//   - one chat span per usage event, under its agent's span, ending at the
//     usage's time, with its tokens; the chat spans (with the unattributed
//     remainder) add up to end.usage, kind by kind.
func Check(spans []Span, evs []events.Event, parentSpanID string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	byID := map[string]Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	var roots []Span
	for _, s := range spans {
		if _, ok := byID[s.ParentID]; !ok {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 {
		fail("%d root spans, want 1: %v", len(roots), names(roots))
		return errs
	}
	root := roots[0]
	if root.ParentID != parentSpanID {
		fail("root span's parent %q, want %q", root.ParentID, parentSpanID)
	}
	var start *events.Start
	var end *events.End
	for _, e := range evs {
		switch e := e.(type) {
		case *events.Start:
			start = e
		case *events.End:
			end = e
		}
	}
	if end == nil {
		return append(errs, fmt.Errorf("the stream has no end"))
	}
	if start != nil {
		if want := "invoke_agent " + start.Runtime; root.Name != want {
			fail("root span %q, want %q", root.Name, want)
		}
		checkTime(fail, "root start", root.Start, start.Time)
		if root.Str("agentrun.sandbox") != start.Sandbox || root.Str("agentrun.network.mode") != start.Network.Mode {
			fail("root sandbox %q network %q, start has %q %q", root.Str("agentrun.sandbox"), root.Str("agentrun.network.mode"), start.Sandbox, start.Network.Mode)
		}
	}
	checkTime(fail, "root end", root.End, end.Time)
	if root.Str("agentrun.end.status") != end.Status {
		fail("root end status %q, end has %q", root.Str("agentrun.end.status"), end.Status)
	}
	if end.Status != events.StatusFinished && root.Str("error.type") != end.Status {
		fail("root error.type %q, want %q", root.Str("error.type"), end.Status)
	}
	checkCounts(fail, "root", root, end.Usage.TokenCounts)

	// Agents: the root, then each subagent's span by its id.
	agentSpan := map[string]Span{"": root}
	children := map[string][]Span{}
	for _, s := range spans {
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	parentOf := func(p *string) (Span, bool) {
		if p == nil {
			return root, true
		}
		s, ok := agentSpan[*p]
		return s, ok
	}
	used := map[string]bool{root.SpanID: true}
	take := func(parent Span, name string, match func(Span) bool) (Span, bool) {
		for _, c := range children[parent.SpanID] {
			if !used[c.SpanID] && c.Name == name && match(c) {
				used[c.SpanID] = true
				return c, true
			}
		}
		return Span{}, false
	}
	toolStarts := map[string]*events.ToolStart{}
	var sum events.TokenCounts
	for _, e := range evs {
		switch e := e.(type) {
		case *events.SubagentStart:
			p, ok := parentOf(e.Parent)
			if !ok {
				fail("subagent %s: no span for its parent %v", e.ID, *e.Parent)
				continue
			}
			s, ok := take(p, "invoke_agent "+e.Kind, func(s Span) bool { return s.Str("gen_ai.agent.id") == e.ID })
			if !ok {
				fail("subagent %s (%s): no invoke_agent span under %q", e.ID, e.Kind, p.Name)
				continue
			}
			checkTime(fail, "subagent "+e.ID+" start", s.Start, e.Time)
			agentSpan[e.ID] = s
		case *events.SubagentEnd:
			if s, ok := agentSpan[e.ID]; ok {
				checkTime(fail, "subagent "+e.ID+" end", s.End, e.Time)
				if s.Str("agentrun.subagent.status") != e.Status {
					fail("subagent %s status %q, want %q", e.ID, s.Str("agentrun.subagent.status"), e.Status)
				}
			}
		case *events.ToolStart:
			toolStarts[e.ID] = e
		case *events.Tool:
			p, ok := parentOf(e.Parent)
			if !ok {
				fail("tool %s: no span for its parent", e.ID)
				continue
			}
			s, ok := take(p, "execute_tool "+e.Name, func(s Span) bool { return s.Str("gen_ai.tool.call.id") == e.ID })
			if !ok {
				fail("tool %s (%s): no execute_tool span under %q", e.ID, e.Name, p.Name)
				continue
			}
			if ts := toolStarts[e.ID]; ts != nil {
				checkTime(fail, "tool "+e.ID+" start", s.Start, ts.Time)
			}
			checkTime(fail, "tool "+e.ID+" end", s.End, e.Time)
			if s.Str("agentrun.tool.summary") != e.Summary || s.Attrs["agentrun.tool.denied"] != e.Denied {
				fail("tool %s: summary %q denied %v, want %q %v", e.ID, s.Str("agentrun.tool.summary"), s.Attrs["agentrun.tool.denied"], e.Summary, e.Denied)
			}
			if e.Error != nil && s.Attrs["agentrun.tool.error"] != *e.Error {
				fail("tool %s: error %v, want %v", e.ID, s.Attrs["agentrun.tool.error"], *e.Error)
			}
		case *events.Usage:
			p, ok := parentOf(e.Parent)
			if !ok {
				fail("usage: no span for its parent")
				continue
			}
			name := "chat"
			if e.Model != nil {
				name += " " + *e.Model
			}
			c := e.Counts()
			_, ok = take(p, name, func(s Span) bool {
				return s.Attrs["agentrun.usage.unattributed"] == nil && s.End.Equal(mustTime(e.Time)) && countsEqual(s, c)
			})
			if !ok {
				fail("usage at %s (%s): no matching chat span under %q", e.Time, name, p.Name)
				continue
			}
			sum.Add(c)
		}
	}
	// The remainder spans, then the sums.
	for _, c := range children[root.SpanID] {
		if !used[c.SpanID] && c.Attrs["agentrun.usage.unattributed"] == true {
			used[c.SpanID] = true
			sum.Add(countsOf(c))
		}
	}
	for _, s := range spans {
		if !used[s.SpanID] {
			fail("span %q (%s) matches no event", s.Name, s.SpanID)
		}
	}
	if a, b := show(sum), show(end.Usage.TokenCounts); !sumsEqual(sum, end.Usage.TokenCounts) {
		fail("the chat spans add up to %s, end.usage is %s", a, b)
	}
	return errs
}

func names(spans []Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

func mustTime(s string) time.Time {
	t, _ := time.Parse(events.TimeFormat, s)
	return t
}

func checkTime(fail func(string, ...any), what string, got time.Time, want string) {
	if w := mustTime(want); !got.Equal(w) {
		fail("%s at %s, the event's time is %s", what, got.Format(time.RFC3339Nano), want)
	}
}

// countsOf reads a span's agentrun.usage.* attributes.
func countsOf(s Span) events.TokenCounts {
	get := func(k string) *int64 {
		if v, ok := s.Int(k); ok {
			return &v
		}
		return nil
	}
	c := events.TokenCounts{InputTokens: get("agentrun.usage.input_tokens"), OutputTokens: get("agentrun.usage.output_tokens"),
		CacheReadTokens: get("agentrun.usage.cache_read_tokens"), CacheWriteTokens: get("agentrun.usage.cache_write_tokens")}
	if v, ok := s.Attrs["agentrun.usage.cost_usd"].(float64); ok {
		c.CostUSD = &v
	}
	return c
}

func countsEqual(s Span, c events.TokenCounts) bool { return show(countsOf(s)) == show(c) }

func checkCounts(fail func(string, ...any), what string, s Span, c events.TokenCounts) {
	if got := countsOf(s); !sumsEqual(got, c) {
		fail("%s usage %s, want %s", what, show(got), show(c))
	}
	in := int64(0)
	for _, p := range []*int64{c.InputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			in += *p
		}
	}
	if v, ok := s.Int("gen_ai.usage.input_tokens"); (c.InputTokens != nil || c.CacheReadTokens != nil) && (!ok || v != in) {
		fail("%s gen_ai.usage.input_tokens %d, want the whole input %d", what, v, in)
	}
}

// sumsEqual compares token counts exactly and costs to a float's rounding.
func sumsEqual(a, b events.TokenCounts) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	if !eq(a.InputTokens, b.InputTokens) || !eq(a.OutputTokens, b.OutputTokens) || !eq(a.CacheReadTokens, b.CacheReadTokens) || !eq(a.CacheWriteTokens, b.CacheWriteTokens) {
		return false
	}
	if (a.CostUSD == nil) != (b.CostUSD == nil) {
		return false
	}
	return a.CostUSD == nil || math.Abs(*a.CostUSD-*b.CostUSD) < 1e-6
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Contains reports whether any span, event or resource attribute holds
// text (to check that a prompt was not exported).
func Contains(spans []Span, text string) bool {
	has := func(m map[string]any) bool {
		for _, v := range m {
			if s, ok := v.(string); ok && strings.Contains(s, text) {
				return true
			}
		}
		return false
	}
	for _, s := range spans {
		if strings.Contains(s.Name, text) || has(s.Attrs) || has(s.Resource) {
			return true
		}
		for _, e := range s.Events {
			if has(e.Attrs) {
				return true
			}
		}
	}
	return false
}

// Tree draws the spans as an indented tree, children in start order, each
// with its duration and its tokens (for logs and docs/telemetry.md).
func Tree(spans []Span) string {
	children := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if ids[s.ParentID] {
			children[s.ParentID] = append(children[s.ParentID], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var draw func(s Span, depth int)
	draw = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s  %v", strings.Repeat("  ", depth), s.Name, s.End.Sub(s.Start).Round(time.Millisecond))
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
			if v, ok := s.Int(k); ok {
				fmt.Fprintf(&b, "  %s=%d", strings.TrimPrefix(k, "gen_ai.usage."), v)
			}
		}
		if v, ok := s.Attrs["agentrun.usage.cost_usd"].(float64); ok {
			fmt.Fprintf(&b, "  cost_usd=%.4f", v)
		}
		if v := s.Str("agentrun.tool.summary"); v != "" {
			fmt.Fprintf(&b, "  %q", v)
		}
		if s.Attrs["agentrun.usage.unattributed"] == true {
			b.WriteString("  (unattributed)")
		}
		b.WriteByte('\n')
		cs := children[s.SpanID]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].Start.Before(cs[j].Start) })
		for _, c := range cs {
			draw(c, depth+1)
		}
	}
	for _, r := range roots {
		draw(r, 0)
	}
	return b.String()
}
