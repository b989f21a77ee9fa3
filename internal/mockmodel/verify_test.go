package mockmodel

import (
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

func mainCall(step int, in, out int64) Call {
	return Call{Scenario: "denied", Role: RoleMain, Step: step, Status: 200, Usage: Usage{InputTokens: in, OutputTokens: out}}
}

// TestAsSeenByClient: the earlier of two calls of the same step is the one
// the client dropped; side calls repeat by nature and never count.
func TestAsSeenByClient(t *testing.T) {
	side := Call{Role: RoleSide, Kind: SideTitle, Status: 200}
	got := AsSeenByClient([]Call{side, mainCall(0, 10, 20), mainCall(0, 10, 20), side, mainCall(1, 11, 25)})
	if !got[1].Aborted || got[0].Aborted || got[2].Aborted || got[3].Aborted || got[4].Aborted {
		t.Errorf("aborted %v %v %v %v %v", got[0].Aborted, got[1].Aborted, got[2].Aborted, got[3].Aborted, got[4].Aborted)
	}
	if !Retried([]Call{mainCall(0, 10, 20), mainCall(0, 10, 20)}) || Retried([]Call{mainCall(0, 10, 20), side, side, mainCall(1, 11, 25)}) {
		t.Error("Retried")
	}
}

// TestVerifyUsageDroppedCall: the stream of a run whose client dropped a
// finished call and asked it again (seen in CI) verifies; the same stream
// with a wrong count does not.
func TestVerifyUsageDroppedCall(t *testing.T) {
	usage := func(in int64, out *int64) *events.Usage {
		return &events.Usage{InputTokens: events.Int64(in), OutputTokens: out, CacheReadTokens: events.Int64(0), CacheWriteTokens: events.Int64(0)}
	}
	end := &events.End{Usage: events.Totals{TokenCounts: events.TokenCounts{InputTokens: events.Int64(31), OutputTokens: events.Int64(46),
		CacheReadTokens: events.Int64(0), CacheWriteTokens: events.Int64(0)}}}
	ledger := []Call{mainCall(0, 10, 20), mainCall(0, 10, 20), mainCall(1, 11, 25)}
	stream := []events.Event{usage(10, nil), usage(10, events.Int64(20)), usage(11, events.Int64(25)), end}
	if errs := VerifyUsage(stream, ledger, false); len(errs) != 0 {
		t.Errorf("a dropped and asked-again call: %v", errs)
	}
	stream[2] = usage(11, events.Int64(26))
	if errs := VerifyUsage(stream, ledger, false); len(errs) == 0 {
		t.Error("a wrong output count verified")
	}
}

// TestVerifyUsageCutSubagentCall: a subagent's stream the client cut (the
// mock's Aborted, with the partial usage of its first chunk) and asked
// again leaves no usage event of its own (seen in CI with claude-code);
// the run verifies, and a wrong count still does not.
func TestVerifyUsageCutSubagentCall(t *testing.T) {
	parent := "toolu_1"
	sub := func(step int, u Usage, aborted bool) Call {
		return Call{Scenario: "subagent", Role: RoleSubagent, Step: step, Status: 200, Usage: u, Aborted: aborted}
	}
	usage := func(u Usage, p *string) *events.Usage {
		return &events.Usage{Parent: p, InputTokens: events.Int64(u.InputTokens), OutputTokens: events.Int64(u.OutputTokens),
			CacheReadTokens: events.Int64(u.CacheReadTokens), CacheWriteTokens: events.Int64(u.CacheWriteTokens)}
	}
	main := Usage{InputTokens: 110, OutputTokens: 20}
	first, second := Usage{InputTokens: 40, OutputTokens: 60, CacheReadTokens: 2000}, Usage{InputTokens: 41, OutputTokens: 67, CacheReadTokens: 2500}
	cut := first
	cut.OutputTokens = 1
	ledger := []Call{{Scenario: "subagent", Role: RoleMain, Status: 200, Usage: main}, sub(0, cut, true), sub(0, first, false), sub(1, second, false)}
	end := &events.End{}
	for _, tc := range []struct {
		name   string
		stream []events.Event
		ok     bool
	}{
		{"each served call once", []events.Event{usage(main, nil), usage(first, &parent), usage(second, &parent), end}, true},
		{"a wrong output", []events.Event{usage(main, nil), usage(first, &parent), usage(Usage{InputTokens: 41, OutputTokens: 68, CacheReadTokens: 2500}, &parent), end}, false},
		{"a served call without its event", []events.Event{usage(main, nil), usage(first, &parent), end}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errs := VerifyUsage(tc.stream, ledger, false); (len(errs) == 0) != tc.ok {
				t.Errorf("errors %v, want ok=%v", errs, tc.ok)
			}
		})
	}
}
