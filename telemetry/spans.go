package telemetry

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun-dev/agentrun/events"
)

// builder turns one run's event stream into spans (docs/telemetry.md, "The
// span tree"): the run is the root invoke_agent span, each subagent an
// invoke_agent span under the agent that started it, each model call's
// usage a chat span and each tool call an execute_tool span under the agent
// that made it. So the span tree is the event tree of parents. Every span
// carries the times of its events. It is fed from one goroutine.
type builder struct {
	tracer     trace.Tracer
	conv       Semconv
	content    bool
	parentCtx  context.Context // the caller's trace (TRACEPARENT), or none
	maxSpans   int
	maxDenied  int
	metrics    *instruments // nil: spans only
	models     Models
	runtime    string
	model      string // start.model (--model)
	sandbox    string
	netMode    string
	root       trace.Span
	main       *agent
	agents     map[string]*agent // subagents with a span, by id
	tools      map[string]*openTool
	spans      int   // spans started, the root included
	dropped    int64 // spans not made: over maxSpans
	denied     int   // refused connections (a summary counts its suppressed)
	deniedEvts int
	deniedLost int
	exported   events.Totals // the usage carried by chat spans, by model
	done       bool
}

// agent is the main agent or a subagent: its span and where its next model
// call starts.
type agent struct {
	ctx    context.Context
	span   trace.Span // nil for the main agent (the root is closed by end)
	parent *agent
	model  string
	// waited is when the agent last got something back (a model call's
	// usage, a tool's result, a subagent's end) or, for a subagent, its
	// start: the event stream has no
	// event for a model call's start, so its chat span starts there.
	waited time.Time
	ended  bool
	texts  []string // opt-in content since its last chat span
	textN  int
}

type openTool struct {
	span  trace.Span
	agent *agent
}

func newBuilder(parent context.Context, tr trace.Tracer, c Config, m *instruments, models Models) *builder {
	if parent == nil {
		parent = context.Background()
	}
	return &builder{tracer: tr, conv: c.Semconv, content: c.CaptureContent, parentCtx: parent,
		maxSpans: orDefault(c.MaxSpans, MaxSpans), maxDenied: orDefault(c.MaxDeniedEvents, MaxDeniedEvents),
		metrics: m, models: models, agents: map[string]*agent{}, tools: map[string]*openTool{},
		exported: events.NewTotals()}
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// eventTime is when the event was written; a time that does not parse
// (never, from agentrun's own writer) is now.
func eventTime(e events.Event) time.Time {
	s := events.Head(e).Time
	if t, ok := parseEventTime(s); ok {
		return t
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	return time.Now()
}

// parseEventTime reads events.TimeFormat (2006-01-02T15:04:05.000Z) by its
// fixed positions: every event has a time, and time.Parse's general
// layout walk was the builder's largest cost.
func parseEventTime(s string) (time.Time, bool) {
	if len(s) != len(events.TimeFormat) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	var f [7]int
	for i, p := range [7][2]int{{0, 4}, {5, 2}, {8, 2}, {11, 2}, {14, 2}, {17, 2}, {20, 3}} {
		v, ok := num(p[0], p[1])
		if !ok {
			return time.Time{}, false
		}
		f[i] = v
	}
	if f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 60 {
		return time.Time{}, false
	}
	return time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], f[6]*int(time.Millisecond), time.UTC), true
}

func (b *builder) event(e events.Event) {
	if b.done {
		return
	}
	t := eventTime(e)
	if _, isEnd := e.(*events.End); b.root == nil && !isEnd {
		if s, ok := e.(*events.Start); ok {
			b.start(s, t)
		}
		return // nothing comes before start but end
	}
	switch e := e.(type) {
	case *events.Prompt:
		// The main agent's first model call follows its prompt.
		if b.main.waited.Before(t) {
			b.main.waited = t
		}
		if b.content {
			b.root.SetAttributes(keyInputMessages.String(messages("user", e.Text, "")))
		}
	case *events.ToolStart:
		b.toolStart(e, t)
	case *events.Tool:
		b.toolEnd(e, t)
	case *events.Text:
		if b.content {
			b.agentOf(e.Parent).addText(e.Text)
		}
	case *events.Usage:
		b.usage(e, t)
	case *events.SubagentStart:
		b.subagentStart(e, t)
	case *events.SubagentEnd:
		b.subagentEnd(e, t)
	case *events.NetworkAccess:
		b.network(e, t)
	case *events.End:
		b.end(e, t)
	}
}

// startSpan starts a span unless the run has made maxSpans of them.
func (b *builder) startSpan(ctx context.Context, name string, t time.Time, kind trace.SpanKind, attrs ...attribute.KeyValue) trace.Span {
	if b.spans >= b.maxSpans {
		b.dropped++
		return nil
	}
	b.spans++
	_, s := b.tracer.Start(ctx, name, trace.WithTimestamp(t), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return s
}

func (b *builder) start(s *events.Start, t time.Time) {
	b.runtime, b.sandbox, b.netMode = s.Runtime, s.Sandbox, s.Network.Mode
	if s.Model != nil {
		b.model = *s.Model
	}
	b.openRoot(t, keySandbox.String(s.Sandbox), keyNetworkMode.String(s.Network.Mode),
		keyNetworkEnforced.Bool(s.Network.Enforced))
}

func (b *builder) openRoot(t time.Time, attrs ...attribute.KeyValue) {
	attrs = append([]attribute.KeyValue{keyOperation.String(opInvokeAgent), b.conv.provider(providerOf(b.runtime)),
		keyAgentName.String(b.runtime), keyRuntime.String(b.runtime)}, attrs...)
	if b.model != "" {
		attrs = append(attrs, keyRequestModel.String(b.model))
	}
	name := opInvokeAgent
	if b.runtime != "" {
		name += " " + cut(b.runtime, maxNameBytes)
	}
	b.spans++
	ctx, root := b.tracer.Start(b.parentCtx, name, trace.WithTimestamp(t), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	b.root = root
	b.main = &agent{ctx: ctx, model: b.model, waited: t}
}

// sampledSpans is how many spans the run exports: none when the caller's
// trace is not sampled (TRACEPARENT's flags 00).
func (b *builder) sampledSpans() int64 {
	if b.root == nil || !b.root.SpanContext().IsSampled() {
		return 0
	}
	return int64(b.spans)
}

// agentOf is the agent a parent field names: the main agent for null, and
// for a subagent without a span (over the cap) too.
func (b *builder) agentOf(parent *string) *agent {
	if parent != nil {
		if a, ok := b.agents[*parent]; ok {
			return a
		}
	}
	return b.main
}

func (a *agent) addText(s string) {
	if a.textN >= MaxContentBytes {
		return
	}
	s = cut(s, MaxContentBytes-a.textN)
	a.texts = append(a.texts, s)
	a.textN += len(s)
}

func (b *builder) toolStart(e *events.ToolStart, t time.Time) {
	a := b.agentOf(e.Parent)
	s := b.startSpan(a.ctx, opExecuteTool+" "+cut(e.Name, maxNameBytes), t, trace.SpanKindInternal,
		keyOperation.String(opExecuteTool), keyToolName.String(e.Name), keyToolCallID.String(e.ID),
		keyToolType.String("function"), keyToolSummary.String(e.Summary))
	if s != nil {
		b.tools[e.ID] = &openTool{span: s, agent: a}
	}
}

func (b *builder) toolEnd(e *events.Tool, t time.Time) {
	ot, ok := b.tools[e.ID]
	if !ok {
		return // its tool_start was over the cap (and counted there)
	}
	delete(b.tools, e.ID)
	ot.span.SetAttributes(keyToolDenied.Bool(e.Denied))
	if e.Error != nil {
		ot.span.SetAttributes(keyToolError.Bool(*e.Error))
		if *e.Error {
			ot.span.SetAttributes(keyErrorType.String("tool_error"))
			ot.span.SetStatus(codes.Error, "the tool call failed")
		}
	}
	ot.span.End(trace.WithTimestamp(t))
	ot.agent.waited = t
}

func (b *builder) usage(e *events.Usage, t time.Time) {
	a := b.agentOf(e.Parent)
	started := a.waited
	if started.IsZero() || started.After(t) {
		started = t
	}
	model := ""
	if e.Model != nil {
		model = *e.Model
	}
	c := e.Counts()
	if b.metrics != nil {
		b.metrics.call(b, a.model, model, c, t.Sub(started))
	}
	name := opChat
	if model != "" {
		name += " " + cut(model, maxNameBytes)
	}
	attrs := []attribute.KeyValue{keyOperation.String(opChat), b.conv.provider(providerOf(b.runtime))}
	if a.model != "" {
		attrs = append(attrs, keyRequestModel.String(a.model))
	}
	if model != "" {
		attrs = append(attrs, keyResponseModel.String(model))
	}
	attrs = append(attrs, b.usageAttrs(c)...)
	if b.content && len(a.texts) > 0 {
		attrs = append(attrs, keyOutputMessages.String(messagesOf("assistant", a.texts)))
	}
	a.texts, a.textN = nil, 0
	a.waited = t
	s := b.startSpan(a.ctx, name, started, trace.SpanKindClient, attrs...)
	if s == nil {
		return // its usage is in the end's unattributed chat span
	}
	b.exported.AddModel(model, c)
	s.End(trace.WithTimestamp(t))
}

// usageAttrs are a usage's tokens in the conventions' meaning
// (gen_ai.usage.input_tokens includes the cache) and in the event stream's
// (agentrun.usage.*). Fields the runtime did not report are left out.
func (b *builder) usageAttrs(c events.TokenCounts) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if in := wholeInput(c); in != nil {
		attrs = append(attrs, keyInputTokens.Int64(*in))
	}
	if c.OutputTokens != nil {
		attrs = append(attrs, keyOutputTokens.Int64(*c.OutputTokens))
	}
	if b.conv == SemconvLatest {
		if c.CacheReadTokens != nil {
			attrs = append(attrs, keyCacheRead.Int64(*c.CacheReadTokens))
		}
		if c.CacheWriteTokens != nil {
			attrs = append(attrs, keyCacheCreation.Int64(*c.CacheWriteTokens))
		}
	}
	for _, f := range []struct {
		k attribute.Key
		v *int64
	}{{keyUsageInput, c.InputTokens}, {keyUsageOutput, c.OutputTokens}, {keyUsageCacheRead, c.CacheReadTokens}, {keyUsageCacheWrite, c.CacheWriteTokens}} {
		if f.v != nil {
			attrs = append(attrs, f.k.Int64(*f.v))
		}
	}
	if c.CostUSD != nil {
		attrs = append(attrs, keyUsageCost.Float64(*c.CostUSD))
	}
	return attrs
}

// wholeInput is every input token, cached or not: the conventions'
// gen_ai.usage.input_tokens. nil when none of the three was reported.
func wholeInput(c events.TokenCounts) *int64 {
	if c.InputTokens == nil && c.CacheReadTokens == nil && c.CacheWriteTokens == nil {
		return nil
	}
	var n int64
	for _, p := range []*int64{c.InputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			n += *p
		}
	}
	return &n
}

func (b *builder) subagentStart(e *events.SubagentStart, t time.Time) {
	// Like a tool_start, a subagent's start is an output of its parent's
	// model call: the parent's next call waits for its end.
	p := b.agentOf(e.Parent)
	model := ""
	if e.Model != nil {
		model = *e.Model
	}
	attrs := []attribute.KeyValue{keyOperation.String(opInvokeAgent), b.conv.provider(providerOf(b.runtime)),
		keyAgentName.String(e.Kind), keyAgentID.String(e.ID), keySubagentNumber.Int(e.Number), keyRuntime.String(b.runtime)}
	if e.Parent != nil {
		attrs = append(attrs, keyParentID.String(*e.Parent))
	}
	if model != "" {
		attrs = append(attrs, keyRequestModel.String(model))
	}
	if b.content && e.Description != "" {
		// The task the model wrote for the subagent: its prompt.
		attrs = append(attrs, keyAgentDesc.String(cut(e.Description, MaxContentBytes)))
	}
	s := b.startSpan(p.ctx, opInvokeAgent+" "+cut(e.Kind, maxNameBytes), t, trace.SpanKindInternal, attrs...)
	if s == nil {
		return // its events go under the main agent
	}
	b.agents[e.ID] = &agent{ctx: trace.ContextWithSpan(p.ctx, s), span: s, parent: p, model: model, waited: t}
}

func (b *builder) subagentEnd(e *events.SubagentEnd, t time.Time) {
	a, ok := b.agents[e.ID]
	if !ok || a.ended {
		return
	}
	a.ended = true
	a.span.SetAttributes(keySubagentStatus.String(e.Status))
	a.span.SetAttributes(b.usageAttrs(e.Usage.TokenCounts)...)
	if e.Status != events.SubagentFinished {
		a.span.SetAttributes(keyErrorType.String(e.Status))
		a.span.SetStatus(codes.Error, "the subagent "+e.Status)
	}
	a.span.End(trace.WithTimestamp(t))
	a.parent.waited = t
}

func (b *builder) network(e *events.NetworkAccess, t time.Time) {
	if e.Allowed {
		return
	}
	b.denied += max(1, e.Suppressed)
	if b.deniedEvts >= b.maxDenied {
		b.deniedLost++
		return
	}
	b.deniedEvts++
	attrs := []attribute.KeyValue{keyServerAddress.String(e.Host), keyServerPort.Int(e.Port)}
	if e.Reason != nil {
		attrs = append(attrs, keyDeniedReason.String(*e.Reason))
	}
	if e.Suppressed > 0 {
		attrs = append(attrs, keySuppressed.Int(e.Suppressed))
	}
	b.root.AddEvent("agentrun.network.denied", trace.WithTimestamp(t), trace.WithAttributes(attrs...))
}

func (b *builder) end(e *events.End, t time.Time) {
	b.done = true
	if b.root == nil {
		// A run that ended before its runtime started (rejected, or failed
		// to start) is one span, from when agentrun began.
		b.openRoot(t.Add(-time.Duration(e.DurationMs) * time.Millisecond))
	}
	// The aggregator ends every tool and subagent before end; a span still
	// open here is one whose event never came (never, from agentrun's own
	// stream), closed so that nothing is left unexported.
	for id, ot := range b.tools {
		ot.span.End(trace.WithTimestamp(t))
		delete(b.tools, id)
	}
	for _, a := range b.agents {
		if !a.ended {
			a.ended = true
			a.span.SetStatus(codes.Error, "the subagent did not end")
			a.span.End(trace.WithTimestamp(t))
		}
	}
	b.unattributed(e.Usage, t)
	attrs := []attribute.KeyValue{keyEndStatus.String(e.Status), keyDurationMs.Int64(e.DurationMs),
		keyDeniedCount.Int(b.denied), keySpansDropped.Int64(b.dropped)}
	attrs = append(attrs, b.usageAttrs(e.Usage.TokenCounts)...)
	if e.ExitCode != nil {
		attrs = append(attrs, keyExitCode.Int(*e.ExitCode))
	}
	if e.SessionID != nil {
		attrs = append(attrs, keyConversationID.String(*e.SessionID))
	}
	if b.deniedLost > 0 {
		attrs = append(attrs, keyDeniedDropped.Int(b.deniedLost))
	}
	if b.content && e.Result != nil {
		attrs = append(attrs, keyOutputMessages.String(messages("assistant", *e.Result, "stop")))
	}
	b.root.SetAttributes(attrs...)
	if e.Status != events.StatusFinished {
		b.root.SetAttributes(keyErrorType.String(e.Status))
		b.root.SetStatus(codes.Error, e.Status)
	}
	if b.metrics != nil {
		b.metrics.run(b, e)
	}
	b.root.End(trace.WithTimestamp(t))
}

// unattributed adds, under the root, one chat span per model for the part
// of end.usage that no chat span carries, so that the chat spans add up to
// end.usage: claude-code's total counts its own helper calls, which have no
// usage event, and the calls over the span cap have no span. A part is
// left out where the spans already carry more than end.usage (only a forged
// output can do that).
func (b *builder) unattributed(total events.Totals, t time.Time) {
	byModel := total.ByModel
	if len(byModel) == 0 && !total.TokenCounts.IsZero() {
		byModel = map[string]events.TokenCounts{events.UnknownModel: total.TokenCounts}
	}
	for _, model := range sortedKeys(byModel) {
		rest, any := remainder(byModel[model], b.exported.ByModel[model])
		if !any {
			continue
		}
		attrs := []attribute.KeyValue{keyOperation.String(opChat), b.conv.provider(providerOf(b.runtime)), keyUnattributed.Bool(true)}
		name := opChat
		if model != events.UnknownModel {
			attrs = append(attrs, keyResponseModel.String(model))
			name += " " + cut(model, maxNameBytes)
		}
		attrs = append(attrs, b.usageAttrs(rest)...)
		// Not bounded by maxSpans: at most one per model of end.usage.
		b.spans++
		_, s := b.tracer.Start(trace.ContextWithSpan(b.parentCtx, b.root), name, trace.WithTimestamp(t),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		s.End(trace.WithTimestamp(t))
	}
}

// remainder is want minus have, field by field, where it is more than
// nothing; any reports whether some field is.
func remainder(want, have events.TokenCounts) (events.TokenCounts, bool) {
	var out events.TokenCounts
	any := false
	sub := func(w, h *int64) *int64 {
		if w == nil {
			return nil
		}
		d := *w
		if h != nil {
			d -= *h
		}
		if d <= 0 {
			return nil
		}
		any = true
		return &d
	}
	out.InputTokens = sub(want.InputTokens, have.InputTokens)
	out.OutputTokens = sub(want.OutputTokens, have.OutputTokens)
	out.CacheReadTokens = sub(want.CacheReadTokens, have.CacheReadTokens)
	out.CacheWriteTokens = sub(want.CacheWriteTokens, have.CacheWriteTokens)
	if want.CostUSD != nil {
		d := *want.CostUSD
		if have.CostUSD != nil {
			d -= *have.CostUSD
		}
		// Float sums differ in the last bits: a remainder below a
		// millionth of a cent is rounding, not a call.
		if d > 1e-8 {
			out.CostUSD, any = &d, true
		}
	}
	return out, any
}

// maxNameBytes bounds the agent-written part of a span name (a tool's or
// a model's name).
const maxNameBytes = 128

// cut shortens s to at most n bytes at a character boundary, marking the
// cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	n -= len(mark)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}

// messages is one message in the conventions' JSON form of
// gen_ai.input.messages and gen_ai.output.messages, its text cut at
// MaxContentBytes.
func messages(role, text, finish string) string {
	return messagesOf(role, []string{text}, finish)
}

func messagesOf(role string, texts []string, finish ...string) string {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	type message struct {
		Role         string `json:"role"`
		Parts        []part `json:"parts"`
		FinishReason string `json:"finish_reason,omitempty"`
	}
	m := message{Role: role}
	for _, t := range texts {
		m.Parts = append(m.Parts, part{Type: "text", Content: cut(t, MaxContentBytes)})
	}
	if len(finish) > 0 {
		m.FinishReason = finish[0]
	}
	out, _ := json.Marshal([]message{m})
	return string(out)
}
