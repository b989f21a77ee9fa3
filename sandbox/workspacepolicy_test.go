package sandbox

import (
	"strings"
	"testing"
)

// TestCheckWorkspace: the machine, its system trees and homes are no
// workspace; under /var/lib only a service's own directories are, and only
// when the service's user owns them, not root (whose services act there).
func TestCheckWorkspace(t *testing.T) {
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
		if err := CheckWorkspace(tt.cwd, tt.owner, homes); (err == nil) != tt.ok {
			t.Errorf("CheckWorkspace(%s, owner %d) = %v", tt.cwd, tt.owner, err)
		}
	}
	if err := CheckWorkspace("/var/lib/cloud/scripts/per-boot", root, homes); err == nil || !strings.Contains(err.Error(), "a project directory elsewhere") {
		t.Errorf("a root-owned directory under /var/lib: %v", err)
	}
	if err := CheckWorkspace("/root", user, []string{"/home/bob"}); err == nil {
		t.Errorf("/root is refused whatever the homes")
	}
	if err := CheckWorkspace("/srv", user, []string{"/"}); err != nil {
		t.Errorf("a home of / (a Pod's user without one) refuses nothing but /: %v", err)
	}
}
