package runner

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// end.duration_ms counts from when agentrun began parsing its command
// line (Options.Started), not from when the run itself began.
func TestDurationCountsFromCommandLine(t *testing.T) {
	o := Options{RunFlags: podcontract.RunFlags{Runtime: "no-such-runtime", Prompt: "hi"}, Started: time.Now().Add(-3 * time.Second)}
	end := Run(context.Background(), o, format.NewJSONL(io.Discard), io.Discard)
	if end.Status != events.StatusRejected || end.DurationMs < 3000 {
		t.Errorf("end %s after %d ms, want rejected after at least 3000", end.Status, end.DurationMs)
	}
}

// newIsolation judges the workspace by its owner as opened (Workspace.UID,
// from the descriptor), not by its name alone.
func TestIsolationChecksTheWorkspaceOwner(t *testing.T) {
	ws := openWS(t, t.TempDir())
	ws.Path, ws.UID = "/var/lib/cloud/scripts/per-boot", 0
	if _, err := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap"}, ws); err == nil || !strings.Contains(err.Error(), "belongs to root") {
		t.Errorf("root-owned: %v", err)
	}
}
