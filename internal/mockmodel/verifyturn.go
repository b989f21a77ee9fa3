package mockmodel

import "github.com/agentrun-dev/agentrun/events"

// VerifyTurnUsage is VerifyUsage for a runtime that reports the main
// agent's usage once per turn, summed over the model calls of the turn,
// instead of once per call (codex exec, which runs one turn): the main
// agent's single usage event must be the sum of the main calls the mock
// served, and end.usage the total of every completed call.
func VerifyTurnUsage(stream []events.Event, ledger []Call) []error {
	merged := make([]Call, 0, len(ledger))
	turn := -1 // index in merged of the call that stands for the turn
	for _, c := range ledger {
		if c.Role != RoleMain || c.Status != 200 || c.Aborted {
			merged = append(merged, c)
			continue
		}
		if turn < 0 {
			turn = len(merged)
			merged = append(merged, c)
			continue
		}
		merged[turn].Usage.add(c.Usage)
	}
	return VerifyUsage(stream, merged, false)
}
