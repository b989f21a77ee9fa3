package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/telemetry/telemetrytest"
)

// exampleStream is the example run of docs/events.md ("An example").
func exampleStream(t *testing.T) []events.Event {
	t.Helper()
	doc, err := os.ReadFile("../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```jsonl\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/events.md has no jsonl example")
	}
	return readStream(t, []byte(block))
}

func readStream(t *testing.T, b []byte) []events.Event {
	t.Helper()
	var evs []events.Event
	rd := events.NewReader(bytes.NewReader(b))
	for {
		e, err := rd.Next()
		if err != nil {
			break
		}
		if e != nil {
			evs = append(evs, e)
		}
	}
	return evs
}

// build runs a stream through a builder on the real SDK, exporting to
// memory, with the metrics read by a manual reader.
func build(t *testing.T, parent context.Context, c Config, evs []events.Event) ([]telemetrytest.Span, *builder, metricdata.ResourceMetrics) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithRawSpanLimits(spanLimits()))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	in, err := newInstruments(mp.Meter(scopeName))
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(parent, tp.Tracer(scopeName), c, in, NewModels())
	for _, e := range evs {
		b.event(e)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return telemetrytest.FromStubs(exp.GetSpans()), b, rm
}

func TestExampleRunIsTheEventTree(t *testing.T) {
	evs := exampleStream(t)
	spans, _, _ := build(t, nil, Config{}, evs)
	for _, err := range telemetrytest.Check(spans, evs, "") {
		t.Error(err)
	}
	// 1 root, 1 subagent, 2 tools, 4 usage, and the remainder of
	// claude-code's total (its helper call) per model.
	var unattributed int
	for _, s := range spans {
		if s.Attrs["agentrun.usage.unattributed"] == true {
			unattributed++
		}
	}
	if len(spans) != 8+unattributed || unattributed != 2 {
		t.Errorf("%d spans (%d unattributed): %v", len(spans), unattributed, spanNames(spans))
	}
	if telemetrytest.Contains(spans, "Add tests for the parse module") || telemetrytest.Contains(spans, "All tests pass.") ||
		telemetrytest.Contains(spans, "Find every caller") {
		t.Error("the prompt, a text, the result or a subagent's task was exported without the opt-in")
	}
	root := rootOf(spans)
	if root.Str("gen_ai.system") != "anthropic" || root.Str("gen_ai.provider.name") != "" {
		t.Errorf("v1.36.0 by default: gen_ai.system %q, gen_ai.provider.name %q", root.Str("gen_ai.system"), root.Str("gen_ai.provider.name"))
	}
	if root.Str("gen_ai.request.model") != "sonnet" || root.Str("agentrun.runtime") != "claude-code" || root.Kind != "internal" {
		t.Errorf("root %+v", root)
	}
	if v, _ := root.Attrs["agentrun.usage.cost_usd"].(float64); v != 0.0362 {
		t.Errorf("root cost %v", root.Attrs["agentrun.usage.cost_usd"])
	}
}

func TestLatestConventionsOptIn(t *testing.T) {
	c, _, _ := FromEnv(func(k string) string {
		return map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvSemconvOptIn: "http, " + OptInLatest}[k]
	}, "")
	if c.Semconv != SemconvLatest || !c.Enabled {
		t.Fatalf("config %+v", c)
	}
	spans, _, _ := build(t, nil, c, exampleStream(t))
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "execute_tool") {
			continue // a tool call has no provider
		}
		if s.Str("gen_ai.system") != "" || s.Str("gen_ai.provider.name") != "anthropic" {
			t.Errorf("%s: system %q provider %q", s.Name, s.Str("gen_ai.system"), s.Str("gen_ai.provider.name"))
		}
	}
	chat := find(spans, "chat claude-haiku-4-5")
	if v, _ := chat.Int("gen_ai.usage.cache_read.input_tokens"); v != 9800 {
		t.Errorf("cache read %v", chat.Attrs)
	}
	if v, _ := chat.Int("gen_ai.usage.input_tokens"); v != 3120+9800+1200 {
		t.Errorf("gen_ai.usage.input_tokens %d, want the whole input", v)
	}
}

func TestContentOnlyWithOptIn(t *testing.T) {
	evs := exampleStream(t)
	long := strings.Repeat("é", 3*MaxContentBytes)
	evs[1].(*events.Prompt).Text = long
	spans, _, _ := build(t, nil, Config{CaptureContent: true}, evs)
	root := rootOf(spans)
	in := root.Str("gen_ai.input.messages")
	if !strings.Contains(in, `"role":"user"`) || len(in) > MaxContentBytes+100 || !strings.Contains(in, "…") {
		t.Errorf("input messages (%d bytes) not the cut prompt: %.200s", len(in), in)
	}
	if !strings.Contains(root.Str("gen_ai.output.messages"), "All tests pass.") {
		t.Errorf("result not exported with the opt-in: %v", root.Attrs)
	}
	if d := find(spans, "invoke_agent Explore").Str("gen_ai.agent.description"); d != "Find every caller of parse_line" {
		t.Errorf("subagent description %q", d)
	}
}

func TestContinuesTheCallersTrace(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	evs := exampleStream(t)
	spans, _, _ := build(t, ctx, Config{}, evs)
	for _, s := range spans {
		if s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Fatalf("span %s in trace %s", s.Name, s.TraceID)
		}
	}
	for _, err := range telemetrytest.Check(spans, evs, "00f067aa0ba902b7") {
		t.Error(err)
	}
}

func TestRejectedRunIsOneSpan(t *testing.T) {
	end := &events.End{Status: events.StatusRejected, Detail: "--timeout must be positive", DurationMs: 3, Usage: events.NewTotals()}
	events.Stamp(end, events.TypeEnd, time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC))
	spans, _, _ := build(t, nil, Config{}, []events.Event{end})
	if len(spans) != 1 || spans[0].Str("error.type") != "rejected" || spans[0].Status != "Error" ||
		spans[0].End.Sub(spans[0].Start) != 3*time.Millisecond {
		t.Fatalf("spans %+v", spans)
	}
}

// floodStream is a hostile run's stream: n tool calls and a model call
// every ten of them, in a subagent and in the main agent, through the real
// aggregator.
func floodStream(n int) []events.Event {
	var evs []events.Event
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	agg := aggregator.New(func(e events.Event) error { evs = append(evs, e); return nil }, func() time.Time {
		clock = clock.Add(time.Millisecond)
		return clock
	})
	agg.Start(&events.Start{Runtime: "pi", Sandbox: "bubblewrap", Network: events.Network{Mode: "full", Allow: []string{}},
		DenyRead: []string{}, Cwd: "/w", Argv: []string{}, Env: []string{}})
	agg.Add(records.SubagentStart{ID: "sub", Kind: "worker"})
	for i := 0; i < n; i++ {
		parent := ""
		if i%2 == 1 {
			parent = "sub"
		}
		id := fmt.Sprintf("t%d", i)
		agg.Add(records.ToolStart{ID: id, Parent: parent, Name: "bash", Summary: "bash: x"})
		agg.Add(records.ToolEnd{ID: id, Parent: parent, Error: events.Bool(false)})
		if i%10 == 0 {
			agg.Add(records.Usage{Parent: parent, Model: "gpt-test", Counts: events.TokenCounts{InputTokens: events.Int64(10),
				OutputTokens: events.Int64(int64(i % 7)), CacheReadTokens: events.Int64(3), CacheWriteTokens: events.Int64(0), CostUSD: events.Float64(0.001)}})
		}
		if i%1000 == 0 {
			agg.Add(records.Network{Host: fmt.Sprintf("h%d.example", i), Port: 443, Reason: events.ReasonNotAllowed})
		}
	}
	agg.Add(records.SubagentEnd{ID: "sub"})
	agg.Finish(aggregator.Outcome{Status: events.StatusFinished, ExitCode: events.Int(0), Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	return evs
}

func TestFloodIsBounded(t *testing.T) {
	const n = 30000
	evs := floodStream(n)
	c := Config{MaxSpans: 500, MaxDeniedEvents: 5}
	spans, b, rm := build(t, nil, c, evs)
	if len(spans) > 500+2 { // the cap, and one remainder span per model
		t.Fatalf("%d spans for %d tool calls, cap 500", len(spans), n)
	}
	root := rootOf(spans)
	dropped, _ := root.Int("agentrun.telemetry.spans_dropped")
	if dropped == 0 || dropped != b.dropped || int(dropped)+b.spans != n+n/10+2+1 {
		t.Errorf("dropped %d (builder %d), made %d: want every span not made counted", dropped, b.dropped, b.spans)
	}
	if len(root.Events) != 5 || root.Attrs["agentrun.telemetry.denied_events_dropped"] != int64(n/1000-5) ||
		root.Attrs["agentrun.network.denied"] != int64(n/1000) {
		t.Errorf("denied events %d, attrs %v", len(root.Events), root.Attrs)
	}
	// The usage still adds up: what has no span is in the remainder.
	var sum events.TokenCounts
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "chat") {
			sum.Add(countsOfSpan(s))
		}
	}
	end := evs[len(evs)-1].(*events.End)
	if *sum.InputTokens != *end.Usage.InputTokens || *sum.OutputTokens != *end.Usage.OutputTokens || *sum.CacheReadTokens != *end.Usage.CacheReadTokens {
		t.Errorf("chat spans sum %+v, end.usage %+v", sum, end.Usage.TokenCounts)
	}
	if got := metricSum(rm, MetricDropped); got != float64(dropped) {
		t.Errorf("%s = %v, want %d", MetricDropped, got, dropped)
	}
	// Metrics count every call, span or not.
	if got := histCount(rm, MetricTokenUsage, "chat", TokenOutput); got != uint64(n/10) {
		t.Errorf("token usage points for chat output %d, want %d", got, n/10)
	}
}

func TestMetricsOfARun(t *testing.T) {
	_, _, rm := build(t, nil, Config{}, exampleStream(t))
	if got := metricSum(rm, MetricRuns); got != 1 {
		t.Errorf("%s %v", MetricRuns, got)
	}
	if got := metricSum(rm, MetricCost); got < 0.0361 || got > 0.0363 {
		t.Errorf("%s %v", MetricCost, got)
	}
	if got := histCount(rm, MetricTokenUsage, "chat", TokenInput); got != 4 {
		t.Errorf("chat input token points %d, want one per usage event", got)
	}
	if got := histCount(rm, MetricTokenUsage, "invoke_agent", TokenInput); got != 2 {
		t.Errorf("invoke_agent input token points %d, want one per model", got)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[int64]); ok {
				for _, p := range h.DataPoints {
					if v, ok := p.Attributes.Value("gen_ai.response.model"); ok && v.AsString() != "claude-sonnet-5-5" && v.AsString() != "claude-haiku-4-5" {
						t.Errorf("model label %q", v.AsString())
					}
				}
			}
		}
	}
}

func TestModelLabelIsCapped(t *testing.T) {
	m := NewModels("my-gateway-model")
	for in, want := range map[string]string{"claude-sonnet-5-5": "claude-sonnet-5-5", "my-gateway-model": "my-gateway-model",
		"claude-sonnet-5-5-x7k2p": OtherModel, "": "unknown"} {
		if got := m.Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}

func countsOfSpan(s telemetrytest.Span) events.TokenCounts {
	var c events.TokenCounts
	for k, p := range map[string]**int64{"agentrun.usage.input_tokens": &c.InputTokens, "agentrun.usage.output_tokens": &c.OutputTokens,
		"agentrun.usage.cache_read_tokens": &c.CacheReadTokens} {
		if v, ok := s.Int(k); ok {
			*p = &v
		}
	}
	return c
}

func metricSum(rm metricdata.ResourceMetrics, name string) float64 {
	var v float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					v += float64(p.Value)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					v += p.Value
				}
			}
		}
	}
	return v
}

func histCount(rm metricdata.ResourceMetrics, name, op, tokenType string) uint64 {
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[int64])
			if m.Name != name || !ok {
				continue
			}
			for _, p := range h.DataPoints {
				o, _ := p.Attributes.Value("gen_ai.operation.name")
				tt, _ := p.Attributes.Value("gen_ai.token.type")
				if o.AsString() == op && tt.AsString() == tokenType {
					n += p.Count
				}
			}
		}
	}
	return n
}

func rootOf(spans []telemetrytest.Span) telemetrytest.Span {
	for _, s := range spans {
		if s.ParentID == "" {
			return s
		}
	}
	return telemetrytest.Span{}
}

func find(spans []telemetrytest.Span, name string) telemetrytest.Span {
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	return telemetrytest.Span{}
}

func spanNames(spans []telemetrytest.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func TestEventTime(t *testing.T) {
	for _, s := range []string{"2026-10-04T13:00:03.120Z", "1999-12-31T23:59:59.999Z", "2024-02-29T00:00:00.000Z"} {
		want, _ := time.Parse(events.TimeFormat, s)
		got, ok := parseEventTime(s)
		if !ok || !got.Equal(want) {
			t.Errorf("%s: %v %v, want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "2026-10-04T13:00:03Z", "2026-13-04T13:00:03.120Z", "2026-10-04T13:00:03.12xZ", "2026-10-04 13:00:03.120Z"} {
		if _, ok := parseEventTime(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}
