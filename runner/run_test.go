package runner

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/format"
)

// end.duration_ms counts from when agentrun began parsing its command
// line (Options.Started), not from when the run itself began.
func TestDurationCountsFromCommandLine(t *testing.T) {
	o := Options{Runtime: "no-such-runtime", Prompt: "hi", Started: time.Now().Add(-3 * time.Second)}
	end := Run(context.Background(), o, format.NewJSONL(io.Discard), io.Discard)
	if end.Status != events.StatusRejected || end.DurationMs < 3000 {
		t.Errorf("end %s after %d ms, want rejected after at least 3000", end.Status, end.DurationMs)
	}
}

func TestWorkspaceAllowed(t *testing.T) {
	homes := []string{"/home/alice", "/root"}
	tests := []struct {
		cwd string
		ok  bool
	}{
		{"/", false},
		{"/home", false},
		{"/home/alice", false},
		{"/root", false},
		{"/home/alice/src/project", true},
		{"/home/bob", true},
		{"/srv/work", true},
	}
	for _, tt := range tests {
		if err := workspaceAllowed(tt.cwd, homes); (err == nil) != tt.ok {
			t.Errorf("workspaceAllowed(%s) = %v", tt.cwd, err)
		}
	}
	if err := workspaceAllowed("/srv", []string{"/"}); err != nil {
		t.Errorf("a home of / (a Pod's user without one) refuses nothing but /: %v", err)
	}
}
