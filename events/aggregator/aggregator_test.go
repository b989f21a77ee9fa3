package aggregator

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/contract"
	"github.com/agentrun-dev/agentrun/events/records"
)

// run feeds recs through a fresh aggregator with a clock that advances one
// second per event and returns the events written.
func run(t *testing.T, outcome Outcome, recs ...records.Record) []events.Event {
	t.Helper()
	var out []events.Event
	clock := time.Date(2026, 10, 4, 13, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	a := New(func(e events.Event) error { out = append(out, e); return nil }, now)
	a.Start(&events.Start{Runtime: "claude-code"})
	for _, r := range recs {
		a.Add(r)
	}
	if outcome.Status == "" {
		outcome.Status = events.StatusFinished
	}
	a.Finish(outcome)
	return out
}

func types(evs []events.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, events.Head(e).Type)
	}
	return strings.Join(s, " ")
}

func counts(in, out, cr, cw int64) events.TokenCounts {
	return events.TokenCounts{InputTokens: &in, OutputTokens: &out, CacheReadTokens: &cr, CacheWriteTokens: &cw}
}

func TestSequences(t *testing.T) {
	tests := []struct {
		name string
		recs []records.Record
		want string
	}{
		{"empty run", nil, "start end"},
		{"tool pair", []records.Record{
			records.ToolStart{ID: "t1", Name: "Bash", Summary: "Bash: ls"},
			records.ToolEnd{ID: "t1", Error: events.Bool(false)},
		}, "start tool_start tool end"},
		{"pending tool before end", []records.Record{
			records.ToolStart{ID: "t1", Name: "Bash"},
		}, "start tool_start tool end"},
		{"end-only tool gets its start", []records.Record{
			records.ToolEnd{ID: "t1", Name: "Bash"},
		}, "start tool_start tool end"},
		{"duplicate end ignored", []records.Record{
			records.ToolStart{ID: "t1", Name: "Bash"}, records.ToolEnd{ID: "t1"}, records.ToolEnd{ID: "t1"},
		}, "start tool_start tool end"},
		{"subagent call emits only subagent events", []records.Record{
			records.SubagentStart{ID: "a1", Kind: "Explore"},
			records.ToolEnd{ID: "a1"},
			records.SubagentEnd{ID: "a1"},
		}, "start subagent_start subagent_end end"},
		{"running subagent ended before end", []records.Record{
			records.SubagentStart{ID: "a1", Kind: "Explore"},
		}, "start subagent_start subagent_end end"},
		{"call records emit nothing", []records.Record{
			records.CallStart{CallID: "m1"}, records.CallUsage{CallID: "m1", Counts: counts(1, 1, 1, 1)},
		}, "start end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := types(run(t, Outcome{}, tt.recs...)); got != tt.want {
				t.Errorf("types = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPendingToolHasNullErrorAndSameFields(t *testing.T) {
	evs := run(t, Outcome{},
		records.SubagentStart{ID: "a1", Kind: "Explore"},
		records.ToolStart{ID: "t1", Parent: "a1", Name: "Grep", Summary: "Grep: x"},
	)
	ts := evs[2].(*events.ToolStart)
	tool := evs[3].(*events.Tool)
	if tool.Error != nil || tool.Denied {
		t.Errorf("pending tool: error=%v denied=%v, want null and false", tool.Error, tool.Denied)
	}
	if tool.ID != ts.ID || *tool.Parent != *ts.Parent || tool.Name != ts.Name || tool.Summary != ts.Summary {
		t.Errorf("tool %+v does not repeat tool_start %+v", tool, ts)
	}
	se := evs[4].(*events.SubagentEnd)
	if se.Status != events.SubagentFailed {
		t.Errorf("subagent still running at end: status %q, want failed", se.Status)
	}
}

func TestToolParentFixedAtStart(t *testing.T) {
	// The tool event reuses the parent of its tool_start, whatever the end
	// record says.
	evs := run(t, Outcome{},
		records.SubagentStart{ID: "a1", Kind: "Explore"},
		records.ToolStart{ID: "t1", Parent: "a1", Name: "Read"},
		records.ToolEnd{ID: "t1", Parent: "", Error: events.Bool(true)},
	)
	tool := evs[3].(*events.Tool)
	if tool.Parent == nil || *tool.Parent != "a1" || tool.Error == nil || !*tool.Error {
		t.Errorf("tool = %+v", tool)
	}
}

func TestDeniedIsNotError(t *testing.T) {
	evs := run(t, Outcome{},
		records.ToolStart{ID: "t1", Name: "Bash"},
		records.ToolEnd{ID: "t1", Denied: true, Error: events.Bool(true)},
	)
	tool := evs[2].(*events.Tool)
	if !tool.Denied || tool.Error == nil || *tool.Error {
		t.Errorf("denied tool: denied=%v error=%v, want true and false", tool.Denied, tool.Error)
	}
}

func TestSubagentNumbersAndNesting(t *testing.T) {
	evs := run(t, Outcome{},
		records.SubagentStart{ID: "a1", Kind: "Explore", Model: "haiku", Description: "find\ncallers"},
		records.SubagentStart{ID: "a2", Parent: "a1", Kind: "general-purpose"},
		records.SubagentStart{ID: "a3", Kind: "Plan"},
		records.Usage{Parent: "a2", Model: "m-small", Counts: counts(1, 2, 3, 4)},
		records.Usage{Parent: "a1", Model: "m-small", Counts: counts(10, 20, 30, 40)},
		records.SubagentEnd{ID: "a2"},
		records.SubagentEnd{ID: "a1"},
		records.SubagentEnd{ID: "a3", Failed: true},
	)
	var starts []*events.SubagentStart
	ends := map[string]*events.SubagentEnd{}
	for _, e := range evs {
		switch e := e.(type) {
		case *events.SubagentStart:
			starts = append(starts, e)
		case *events.SubagentEnd:
			ends[e.ID] = e
		}
	}
	for i, s := range starts {
		if s.Number != i+1 {
			t.Errorf("subagent %s number %d, want %d", s.ID, s.Number, i+1)
		}
	}
	if starts[1].Parent == nil || *starts[1].Parent != "a1" || starts[0].Parent != nil {
		t.Errorf("parents: %v %v", starts[0].Parent, starts[1].Parent)
	}
	if starts[0].Description != "find callers" {
		t.Errorf("description %q is not one line", starts[0].Description)
	}
	// a1's usage includes its inner subagent a2; a3 has none.
	if got := *ends["a1"].Usage.InputTokens; got != 11 {
		t.Errorf("a1 input = %d, want 11 (its own 10 + a2's 1)", got)
	}
	if got := *ends["a2"].Usage.InputTokens; got != 1 {
		t.Errorf("a2 input = %d, want 1", got)
	}
	if ends["a3"].Usage.InputTokens != nil || len(ends["a3"].Usage.ByModel) != 0 || ends["a3"].Status != "failed" {
		t.Errorf("a3 end = %+v", ends["a3"])
	}
}

func TestUnknownParentGetsASubagentStart(t *testing.T) {
	evs := run(t, Outcome{}, records.Text{Parent: "ghost", Text: "hi"})
	if got := types(evs); got != "start subagent_start text subagent_end end" {
		t.Fatalf("types = %q", got)
	}
}

func TestUsageAndEndTotals(t *testing.T) {
	t.Run("sum of usage events", func(t *testing.T) {
		evs := run(t, Outcome{},
			records.Usage{Model: "big", Counts: counts(1, 2, 3, 4)},
			records.Usage{Model: "big", Counts: counts(10, 20, 30, 40)},
			records.Usage{Counts: events.TokenCounts{InputTokens: events.Int64(5)}},
		)
		u := evs[1].(*events.Usage)
		if u.ContextTokens == nil || *u.ContextTokens != 8 {
			t.Errorf("context_tokens = %v, want 8", u.ContextTokens)
		}
		u3 := evs[3].(*events.Usage)
		if u3.ContextTokens != nil || u3.Model != nil {
			t.Errorf("partial usage: context %v model %v, want nulls", u3.ContextTokens, u3.Model)
		}
		end := evs[len(evs)-1].(*events.End)
		if *end.Usage.InputTokens != 16 || *end.Usage.OutputTokens != 22 || end.Usage.CostUSD != nil {
			t.Errorf("end usage = %s", mustJSON(end.Usage))
		}
		if *end.Usage.ByModel["big"].InputTokens != 11 || *end.Usage.ByModel[events.UnknownModel].InputTokens != 5 {
			t.Errorf("by_model = %s", mustJSON(end.Usage.ByModel))
		}
		if end.Usage.ByModel[events.UnknownModel].OutputTokens != nil {
			t.Errorf("a field nobody reported must stay null")
		}
	})
	t.Run("no usage at all", func(t *testing.T) {
		evs := run(t, Outcome{})
		got := mustJSON(evs[len(evs)-1].(*events.End).Usage)
		want := `{"input_tokens":null,"output_tokens":null,"cache_read_tokens":null,"cache_write_tokens":null,"cost_usd":null,"by_model":{}}`
		if got != want {
			t.Errorf("usage = %s, want %s", got, want)
		}
	})
	t.Run("runtime total wins, last one", func(t *testing.T) {
		total := events.NewTotals()
		total.AddModel("big", events.TokenCounts{InputTokens: events.Int64(99), CostUSD: events.Float64(0.5)})
		evs := run(t, Outcome{},
			records.Usage{Model: "big", Counts: counts(1, 2, 3, 4)},
			records.Total{Usage: events.NewTotals()},
			records.Total{Usage: total},
		)
		end := evs[len(evs)-1].(*events.End)
		if *end.Usage.InputTokens != 99 || *end.Usage.CostUSD != 0.5 {
			t.Errorf("end usage = %s", mustJSON(end.Usage))
		}
	})
}

func TestResultAndLimits(t *testing.T) {
	var out []events.Event
	a := New(func(e events.Event) error { out = append(out, e); return nil }, nil)
	a.Add(records.CallStart{CallID: "m1"})
	a.Add(records.CallStart{CallID: "m1"})
	a.Add(records.CallStart{Parent: "", CallID: "m2"})
	a.Add(records.SubagentStart{ID: "s"})
	a.Add(records.CallStart{Parent: "s", CallID: "m3"})
	if a.MainCalls() != 2 {
		t.Errorf("main calls = %d, want 2 (duplicates and subagent calls do not count)", a.MainCalls())
	}
	a.Add(records.CallUsage{CallID: "m2", Counts: counts(1, 1, 1, 1)})
	a.Add(records.Usage{CallID: "m1", Counts: counts(10, 10, 10, 10)})
	if a.Tokens() != 44 {
		t.Errorf("tokens = %d, want 44", a.Tokens())
	}
	a.Add(records.Usage{CallID: "m2", Counts: counts(2, 2, 2, 2)})
	if a.Tokens() != 48 {
		t.Errorf("tokens after m2 finished = %d, want 48", a.Tokens())
	}
	a.Add(records.Text{Text: "first"})
	a.Add(records.Text{Parent: "s", Text: "from the subagent"})
	a.Add(records.Text{Text: "last main"})
	end := a.Finish(Outcome{Status: events.StatusFinished})
	if end.Result == nil || *end.Result != "last main" {
		t.Errorf("result = %v, want the main agent's last text", end.Result)
	}
	a2 := New(func(events.Event) error { return nil }, nil)
	a2.Add(records.Text{Text: "text"})
	a2.Add(records.Result{Text: "final"})
	if end := a2.Finish(Outcome{}); *end.Result != "final" {
		t.Errorf("explicit result not used: %v", *end.Result)
	}
	if end := New(func(events.Event) error { return nil }, nil).Finish(Outcome{}); end.Result != nil {
		t.Errorf("no text: result = %v, want null", *end.Result)
	}
}

func TestFieldOrder(t *testing.T) {
	evs := run(t, Outcome{ExitCode: new(int), SessionID: "s1"},
		records.Prompt{Text: "p"},
		records.ToolStart{ID: "t", Name: "Bash", Summary: "Bash: ls"},
		records.ToolEnd{ID: "t", Error: events.Bool(false)},
		records.Text{Text: "hi"},
		records.Usage{Model: "m", Counts: counts(1, 2, 3, 4)},
		records.SubagentStart{ID: "a", Kind: "Explore"},
		records.SubagentEnd{ID: "a"},
		records.Network{Host: "example.com", Port: 443, Allowed: false, Reason: events.ReasonNotAllowed},
	)
	want := contract.FieldOrder
	seen := map[string]bool{}
	for _, e := range evs {
		b, err := events.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		typ := events.Head(e).Type
		seen[typ] = true
		// Optional fields (start.credentials, end.meter) are absent here:
		// this run has no credential.
		var required []string
		for _, k := range want[typ] {
			if !contract.Optional[typ+"."+k] {
				required = append(required, k)
			}
		}
		if got, _ := contract.KeyOrder(b); !reflect.DeepEqual(got, required) {
			t.Errorf("%s keys = %v, want %v", typ, got, required)
		}
		if ts := events.Head(e).Time; len(ts) != len("2026-10-04T13:00:01.000Z") || !strings.HasSuffix(ts, "Z") {
			t.Errorf("%s time %q is not RFC 3339 UTC with milliseconds", typ, ts)
		}
	}
	if len(seen) != 10 {
		t.Errorf("saw %d event types, want all 10", len(seen))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestNetworkSummaries: a summary of the proxy's decisions keeps its count
// in the event, and deniedConnections counts every refusal it stands for.
func TestNetworkSummaries(t *testing.T) {
	var out []events.Event
	a := New(func(e events.Event) error { out = append(out, e); return nil }, time.Now)
	a.Start(&events.Start{Runtime: "claude-code"})
	a.Add(records.Network{Host: "a.example", Port: 443, Reason: events.ReasonNotAllowed})
	a.Add(records.Network{Host: "b.example", Port: 443, Reason: events.ReasonNotAllowed, Suppressed: 40})
	a.Add(records.Network{Host: "c.example", Port: 443, Allowed: true, Suppressed: 9})
	if n := a.Counters().DeniedConnections; n != 41 {
		t.Errorf("deniedConnections %d, want 41", n)
	}
	if e, ok := out[2].(*events.NetworkAccess); !ok || e.Suppressed != 40 {
		t.Errorf("summary event %+v", out[2])
	}
}

// TestMeterMatches: end.meter.matches says whether the CLI reported what
// the API did; with a call the meter could not count it cannot say so.
func TestMeterMatches(t *testing.T) {
	for _, tt := range []struct {
		name  string
		meter events.Meter
		want  bool
	}{
		{"equal", events.Meter{Calls: 1, InputTokens: 5, OutputTokens: 6}, true},
		{"other counts", events.Meter{Calls: 1, InputTokens: 5, OutputTokens: 7}, false},
		{"a call unmetered", events.Meter{Calls: 1, InputTokens: 5, OutputTokens: 6, Unmetered: 1}, false},
		{"only calls unmetered", events.Meter{Unmetered: 2}, false},
	} {
		m := tt.meter
		evs := run(t, Outcome{Meter: &m}, records.Usage{Model: "m", Counts: counts(5, 6, 0, 0)})
		end := evs[len(evs)-1].(*events.End)
		if end.Meter == nil || end.Meter.Matches != tt.want || end.Meter.Unmetered != tt.meter.Unmetered {
			t.Errorf("%s: end.meter %+v, want matches %v", tt.name, end.Meter, tt.want)
		}
	}
}

// TestPartialReachesOnlyOnPartial: partial text goes to OnPartial (main's
// with a nil parent, a started subagent's with its id) and never into the
// stream; a piece of a subagent the stream has not started is dropped
// (it must not start one).
func TestPartialReachesOnlyOnPartial(t *testing.T) {
	var out []events.Event
	var got []string
	a := New(func(e events.Event) error { out = append(out, e); return nil }, nil)
	a.OnPartial(func(p events.Partial) {
		who := "main"
		if p.Parent != nil {
			who = *p.Parent
		}
		got = append(got, who+":"+p.Text)
	})
	a.Start(&events.Start{Runtime: "claude-code"})
	a.Add(records.PartialText{Text: "hel"})
	a.Add(records.PartialText{Parent: "toolu_x", Text: "lost"})
	a.Add(records.SubagentStart{ID: "toolu_1", Kind: "Explore", Description: "d"})
	a.Add(records.PartialText{Parent: "toolu_1", Text: "sub"})
	a.Add(records.PartialText{Text: ""})
	a.Finish(Outcome{Status: events.StatusFinished})
	if strings.Join(got, " ") != "main:hel toolu_1:sub" {
		t.Errorf("partials %q", got)
	}
	if types(out) != "start subagent_start subagent_end end" {
		t.Errorf("stream %s", types(out))
	}
}
