package events

import "testing"

func TestCountersCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Event
		want Counters
	}{
		{"a tool call", &Tool{Error: Bool(false)}, Counters{Tools: 1}},
		{"a failed tool call", &Tool{Error: Bool(true)}, Counters{Tools: 1, ToolErrors: 1}},
		{"a denied tool call", &Tool{Denied: true, Error: Bool(false)}, Counters{Tools: 1, Denials: 1}},
		{"a tool call of unknown outcome", &Tool{}, Counters{Tools: 1}},
		{"a subagent", &SubagentStart{}, Counters{Subagents: 1}},
		{"a refused connection", &NetworkAccess{Reason: String(ReasonNotAllowed)}, Counters{DeniedConnections: 1}},
		{"a summary of refused connections", &NetworkAccess{Reason: String(ReasonNotAllowed), Suppressed: 40}, Counters{DeniedConnections: 40}},
		{"a summary that stands for itself", &NetworkAccess{Reason: String(ReasonPrivateAddress), Suppressed: 1}, Counters{DeniedConnections: 1}},
		{"an allowed connection", &NetworkAccess{Allowed: true}, Counters{}},
		{"an allowed summary", &NetworkAccess{Allowed: true, Suppressed: 9}, Counters{}},
		{"a tool start", &ToolStart{}, Counters{}},
		{"usage", &Usage{}, Counters{}},
		{"the end", &End{}, Counters{}},
	} {
		var c Counters
		c.Count(tc.e)
		if c != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, c, tc.want)
		}
	}
}

func TestTokenTotals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		c      TokenCounts
		tokens int64
		total  *int64
	}{
		{"nothing reported", TokenCounts{CostUSD: Float64(1)}, 0, nil},
		{"zero reported", TokenCounts{OutputTokens: Int64(0)}, 0, Int64(0)},
		{"all four kinds", TokenCounts{InputTokens: Int64(1), OutputTokens: Int64(2), CacheReadTokens: Int64(3), CacheWriteTokens: Int64(4)}, 10, Int64(10)},
		{"some kinds", TokenCounts{InputTokens: Int64(5), CacheReadTokens: Int64(7)}, 12, Int64(12)},
	} {
		got := tc.c.Total()
		if tc.c.Tokens() != tc.tokens || (got == nil) != (tc.total == nil) || (got != nil && *got != *tc.total) {
			t.Errorf("%s: Tokens %d Total %v, want %d %v", tc.name, tc.c.Tokens(), got, tc.tokens, tc.total)
		}
	}
}

func TestTotalsBounded(t *testing.T) {
	tot := NewTotals()
	for m, n := range map[string]int64{"a": 5, "b": 50, "c": 5, "d": 500, "e": 1} {
		tot.AddModel(m, TokenCounts{InputTokens: Int64(n)})
	}
	b, cut := tot.Bounded(3)
	if !cut || len(b.ByModel) != 3 || b.ByModel["d"].Tokens() != 500 || b.ByModel["b"].Tokens() != 50 || b.ByModel["a"].Tokens() != 5 {
		t.Errorf("Bounded(3) = %+v, cut %v: want d, b and a (the tie broken by name)", b.ByModel, cut)
	}
	if b.Tokens() != 561 {
		t.Errorf("the bounded total %d, want the whole 561", b.Tokens())
	}
	if same, cut := tot.Bounded(5); cut || len(same.ByModel) != 5 {
		t.Errorf("Bounded(5) of 5 models cut %v, %d models", cut, len(same.ByModel))
	}
	b.ByModel["d"] = TokenCounts{}
	if tot.ByModel["d"].Tokens() != 500 {
		t.Error("Bounded shares its map with the original")
	}
}
