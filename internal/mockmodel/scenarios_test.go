package mockmodel

import (
	"strings"
	"testing"
)

// TestScenariosAreScripted: every listed scenario has a script (the
// unknown-scenario answer is not what it gets), and a name not listed
// gets that answer.
func TestScenariosAreScripted(t *testing.T) {
	req := &messagesRequest{}
	unknown := func(r reply) bool {
		return len(r.Blocks) == 1 && strings.HasPrefix(r.Blocks[0].Text, "mockmodel: unknown scenario")
	}
	for _, s := range Scenarios {
		if s.What == "" || unknown(mainReply(conv{Scenario: s.Name, Role: RoleMain}, req)) {
			t.Errorf("scenario %q: no script or no description", s.Name)
		}
	}
	if !unknown(mainReply(conv{Scenario: "nope", Role: RoleMain}, req)) {
		t.Error("an unlisted scenario got a script")
	}
}
