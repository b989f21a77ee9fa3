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
		{"/root/project", true}, // under a directory the agent cannot search: covered inside
		// System trees and shared scratch directories.
		{"/usr/local/sbin", false},
		{"/usr", false},
		{"/etc", false},
		{"/etc/cron.d", false},
		{"/var/lib/dpkg", false},
		{"/var/lib/dpkg/info", false},
		{"/var/lib/jenkins", false},
		{"/var/lib/jenkins/workspace", true},
		{"/var/lib/jenkins/workspace/job-1", true}, // a CI server's project directory
		{"/var/lib/buildkite-agent/builds/x", true},
		{"/var/lib/kubelet/pods/x", false},
		{"/var/spool/cron/crontabs", false},
		{"/var/log/x/y", false},
		{"/opt/tool", false},
		{"/boot", false},
		{"/lib64/x", false},
		{"/libexec", false},
		{"/bin", false},
		{"/sbin", false},
		{"/proc/self/cwd", false},
		{"/sys/kernel", false},
		{"/dev", false},
		{"/run/user/1000", false},
		{"/tmp", false},
		{"/var/tmp", false},
		{"/dev/shm", false},
		{"/tmp/build-42", true},
		{"/var/tmp/agentrun-ws-1", true},
		{"/dev/shm/x", true},
		{"/workspace", true}, // the controller's workspace in a Pod
		{"/usrlocal", true},
		{"/etcetera", true},
	}
	for _, tt := range tests {
		if err := workspaceAllowed(tt.cwd, homes); (err == nil) != tt.ok {
			t.Errorf("workspaceAllowed(%s) = %v", tt.cwd, err)
		}
	}
	if err := workspaceAllowed("/root", []string{"/home/bob"}); err == nil {
		t.Errorf("/root is refused whatever the homes")
	}
	if err := workspaceAllowed("/srv", []string{"/"}); err != nil {
		t.Errorf("a home of / (a Pod's user without one) refuses nothing but /: %v", err)
	}
}
