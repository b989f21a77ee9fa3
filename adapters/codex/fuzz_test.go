package codex

import (
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
)

// FuzzTranslate feeds arbitrary output through the adapter and the
// aggregator: no panic, end always last, the contract intact.
func FuzzTranslate(f *testing.F) {
	adapterstest.FuzzTranslate(f, Name, func() adapters.Adapter { return New() },
		lineThread, lineTurn, lineCmdStart, lineCmdFailed, linePatch, lineMCPStart, lineMCPEnd, lineSearch, lineWarning,
		lineTodo, lineMessage, lineDone, `{"type":"turn.failed","error":{"message":"x"}}`)
}
