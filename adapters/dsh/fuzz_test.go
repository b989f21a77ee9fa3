package dsh

import (
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
)

// FuzzTranslate feeds arbitrary output through the adapter and the
// aggregator: no panic, end always last, the contract intact.
func FuzzTranslate(f *testing.F) {
	adapterstest.FuzzTranslate(f, Name, func() adapters.Adapter { return New() },
		lineSession, linePrompt, lineStep, lineTextDelta, lineUsageChunk, lineAnswer, lineCall, lineResult,
		lineTurnEnd, lineTurnError, lineStdout, lineSubSession, lineSubCall)
}
