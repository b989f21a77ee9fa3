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

// TestWorkspaceAllowed: the machine, its system trees and homes are no
// workspace; under /var/lib only a service's own directories are, and only
// when the service's user owns them, not root (whose services act there).
func TestWorkspaceAllowed(t *testing.T) {
	homes := []string{"/home/alice", "/root"}
	const root, user = 0, 1000
	tests := []struct {
		cwd   string
		owner int
		ok    bool
	}{
		{"/", user, false},
		{"/home", root, false},
		{"/home/alice", user, false},
		{"/root", root, false},
		{"/home/alice/src/project", user, true},
		{"/home/bob", user, true},
		{"/srv/work", user, true},
		{"/srv/work", root, true},
		{"/root/project", root, true}, // under a directory the agent cannot search: covered inside
		// System trees and shared scratch directories.
		{"/usr/local/sbin", root, false},
		{"/usr", root, false},
		{"/etc", root, false},
		{"/etc/cron.d", root, false},
		{"/var/lib/dpkg", root, false},
		{"/var/lib/dpkg/info", root, false},
		{"/var/lib/jenkins", user, false},
		{"/var/lib/jenkins/workspace", user, true},
		{"/var/lib/jenkins/workspace/job-1", user, true}, // a CI server's project directory
		{"/var/lib/buildkite-agent/builds/x", user, true},
		{"/var/lib/kubelet/pods/x", user, false},
		// Root's services act on what root owns under /var/lib.
		{"/var/lib/jenkins/workspace/job-1", root, false},
		{"/var/lib/cloud/scripts/per-boot", root, false},
		{"/var/lib/rancher/k3s/server/manifests", root, false},
		{"/var/lib/dkms/module", root, false},
		{"/var/lib/dkms/module", user, true},
		{"/var/spool/cron/crontabs", user, false},
		{"/var/log/x/y", user, false},
		{"/opt/tool", user, false},
		{"/boot", root, false},
		{"/lib64/x", user, false},
		{"/libexec", root, false},
		{"/bin", root, false},
		{"/sbin", root, false},
		{"/proc/self/cwd", user, false},
		{"/sys/kernel", root, false},
		{"/dev", root, false},
		{"/run/user/1000", user, false},
		{"/tmp", root, false},
		{"/var/tmp", root, false},
		{"/dev/shm", root, false},
		{"/tmp/build-42", user, true},
		{"/tmp/build-42", root, true},
		{"/var/tmp/agentrun-ws-1", user, true},
		{"/dev/shm/x", user, true},
		{"/workspace", user, true}, // the controller's workspace in a Pod
		{"/usrlocal", user, true},
		{"/etcetera", user, true},
	}
	for _, tt := range tests {
		if err := workspaceAllowed(tt.cwd, tt.owner, homes); (err == nil) != tt.ok {
			t.Errorf("workspaceAllowed(%s, owner %d) = %v", tt.cwd, tt.owner, err)
		}
	}
	if err := workspaceAllowed("/var/lib/cloud/scripts/per-boot", root, homes); err == nil || !strings.Contains(err.Error(), "a project directory elsewhere") {
		t.Errorf("a root-owned directory under /var/lib: %v", err)
	}
	if err := workspaceAllowed("/root", user, []string{"/home/bob"}); err == nil {
		t.Errorf("/root is refused whatever the homes")
	}
	if err := workspaceAllowed("/srv", user, []string{"/"}); err != nil {
		t.Errorf("a home of / (a Pod's user without one) refuses nothing but /: %v", err)
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
