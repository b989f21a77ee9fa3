package mockmodel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/agentrun-dev/agentrun/events"
)

// ReadLedger reads a ledger saved as JSON lines (cmd/mockmodel --ledger).
func ReadLedger(path string) ([]Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// AsSeenByClient is the ledger as the client lived it. The mock marks a
// call aborted when the client went away mid-stream; a client that drops a
// stream the mock had finished writing leaves no trace but asking the same
// step of the same conversation again (claude-code does, under load, and
// then fetches the call without streaming). The earlier of two such calls
// was discarded by the client, so it is marked aborted in the copy.
func AsSeenByClient(ledger []Call) []Call {
	out := append([]Call(nil), ledger...)
	key := func(c Call) string { return fmt.Sprint(c.Scenario, "/", c.Role, "/", c.Kind, "/", c.Step) }
	last := map[string]int{}
	for i, c := range out {
		if c.Role != RoleSide && c.Status == 200 {
			last[key(c)] = i
		}
	}
	for i := range out {
		if c := &out[i]; c.Role != RoleSide && c.Status == 200 && last[key(*c)] != i {
			c.Aborted = true
		}
	}
	return out
}

// Retried reports a call the client cut or dropped and asked again, as
// AsSeenByClient sees it: the order of a run's events then varies.
func Retried(ledger []Call) bool {
	for _, c := range AsSeenByClient(ledger) {
		if c.Aborted {
			return true
		}
	}
	return false
}

// VerifyUsage checks a run's usage events and end.usage against what the mock
// served, and returns every mismatch:
//   - the main agent's usage events are the main calls, in order, exactly;
//   - the subagents' usage events are the subagent calls, in order, with
//     exact input and cache counts; their output may be null where the
//     runtime does not report it (claude-code 2.1.328 reports a subagent's
//     output only for its last call), but each subagent's last call is exact;
//   - when a call was cut short (AsSeenByClient), the usage events of the
//     main agent and of the subagents each match served calls in any order,
//     and a cut call may have none;
//   - end.usage's token totals are the sum of every completed call served,
//     when no call was cut short (AsSeenByClient says which were).
//
// nullMainOutput allows null main-agent output counts (claude-code run
// without --include-partial-messages reports none).
func VerifyUsage(stream []events.Event, ledger []Call, nullMainOutput bool) []error {
	ledger = AsSeenByClient(ledger)
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var mainCalls, subCalls []Call
	var total Usage
	complete, served := true, false
	for _, c := range ledger {
		if c.Status != 200 {
			continue
		}
		served = true
		if c.Aborted {
			// The client went away mid-stream (an interrupt, or a retry of
			// its own): the call may show as a usage event without output.
			complete = false
		} else {
			total.add(c.Usage)
		}
		switch c.Role {
		case "main":
			mainCalls = append(mainCalls, c)
		case "subagent":
			subCalls = append(subCalls, c)
		}
	}
	var mainEvents, subEvents []*events.Usage
	lastOf := map[string]int{} // subagent id → index of its last usage event in subEvents
	var end *events.End
	for _, e := range stream {
		switch e := e.(type) {
		case *events.Usage:
			if e.Parent == nil {
				mainEvents = append(mainEvents, e)
			} else {
				lastOf[*e.Parent] = len(subEvents)
				subEvents = append(subEvents, e)
			}
		case *events.End:
			end = e
		}
	}
	if !complete {
		// Cut calls finish (in the ledger) out of order: match each usage
		// event to a served call, a cut one with its output unknown.
		errs = append(errs, matchUnordered("main", mainEvents, mainCalls, nullMainOutput)...)
	} else {
		if len(mainEvents) != len(mainCalls) {
			fail("%d main usage events, the mock served %d main calls", len(mainEvents), len(mainCalls))
		}
		for i := 0; i < len(mainEvents) && i < len(mainCalls); i++ {
			if !sameCounts(mainEvents[i], mainCalls[i].Usage, !nullMainOutput) {
				fail("main usage %d = %s, served %+v", i, show(mainEvents[i]), mainCalls[i].Usage)
			}
		}
	}
	switch {
	case !complete:
		// As for the main agent; a subagent's output may be null but for
		// its last call, which a retry makes hard to tell.
		errs = append(errs, matchUnordered("subagent", subEvents, subCalls, true)...)
	case len(subEvents) != len(subCalls):
		fail("%d subagent usage events, the mock served %d subagent calls", len(subEvents), len(subCalls))
	}
	last := map[int]bool{}
	for _, i := range lastOf {
		last[i] = true
	}
	for i := 0; complete && i < len(subEvents) && i < len(subCalls); i++ {
		if !sameCounts(subEvents[i], subCalls[i].Usage, last[i]) {
			fail("subagent usage %d = %s, served %+v", i, show(subEvents[i]), subCalls[i].Usage)
		}
	}
	if end == nil {
		return append(errs, fmt.Errorf("no end event"))
	}
	if !served {
		if !end.Usage.IsZero() || len(end.Usage.ByModel) != 0 {
			b, _ := json.Marshal(end.Usage)
			fail("end.usage = %s, want nulls: the mock served no call", b)
		}
	} else if complete {
		u := end.Usage
		if !eq(u.InputTokens, total.InputTokens) || !eq(u.OutputTokens, total.OutputTokens) ||
			!eq(u.CacheReadTokens, total.CacheReadTokens) || !eq(u.CacheWriteTokens, total.CacheWriteTokens) {
			b, _ := json.Marshal(u)
			fail("end.usage = %s, the mock served %+v in all", b, total)
		}
	}
	return errs
}

// matchUnordered pairs every usage event with one served call of the same
// input and cache counts; the output must match too unless the call was
// cut short (or nullOutput allows null).
func matchUnordered(role string, evs []*events.Usage, calls []Call, nullOutput bool) []error {
	var errs []error
	used := make([]bool, len(calls))
	for i, e := range evs {
		found := false
		for j, c := range calls {
			if !used[j] && sameCounts(e, c.Usage, !(c.Aborted || nullOutput)) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s usage %d = %s matches no call the mock served", role, i, show(e)))
		}
	}
	for j, c := range calls {
		if !used[j] && !c.Aborted {
			errs = append(errs, fmt.Errorf("the mock served a %s call %+v with no usage event", role, c.Usage))
		}
	}
	return errs
}

func (u *Usage) add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
}

func eq(p *int64, v int64) bool { return p != nil && *p == v }

// sameCounts compares one usage event with one served call; the output may
// be null unless exactOutput.
func sameCounts(e *events.Usage, u Usage, exactOutput bool) bool {
	out := eq(e.OutputTokens, u.OutputTokens) || (!exactOutput && e.OutputTokens == nil)
	return out && eq(e.InputTokens, u.InputTokens) && eq(e.CacheReadTokens, u.CacheReadTokens) &&
		eq(e.CacheWriteTokens, u.CacheWriteTokens)
}

func show(e *events.Usage) string {
	b, _ := events.Marshal(e)
	return string(b)
}
