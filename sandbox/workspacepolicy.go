package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Which directories may be the workspace at all: the policy, beside the
// mechanism of workspace.go (the workspace opened once, without following
// links). The runner applies it to --cwd before anything else.

// systemTrees are the machine's own trees: a workspace there would let the
// agent write programs and configuration that root runs or reads
// (/usr/local/sbin, /etc/cron.d, /var/spool/cron), so neither they nor
// anything below them may be the workspace. The shared scratch directories
// /tmp, /var/tmp and /dev/shm may not be the workspace themselves (other
// users' files), but a directory below them may; so may a project under
// /root, which is not a system tree but root's home (refused itself as a
// home), and a service's own project directories under /var/lib (a CI
// server's, such as /var/lib/jenkins/workspace/JOB), except the package
// managers' and the system's state there and any directory root owns:
// a service's project directory belongs to the service's user (jenkins),
// while root's services act on what root owns there
// (/var/lib/cloud/scripts/per-boot, /var/lib/rancher/k3s/server/manifests,
// /var/lib/dkms).
var systemTrees = []string{"/etc", "/usr", "/var", "/opt", "/boot", "/bin", "/sbin", "/lib*", "/proc", "/sys", "/dev", "/run"}

var scratchDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// varLibSystem are the directories under /var/lib that hold the system's
// own state: programs and scripts root runs (dpkg's maintainer scripts),
// its policy (polkit, sudo) or its units.
var varLibSystem = []string{"dpkg", "apt", "rpm", "dnf", "yum", "systemd", "polkit-1", "sudo", "ucf", "pam", "dbus", "apparmor", "kubelet", "containerd", "docker"}

// systemTree is the system tree that holds dir, owned by owner, or "".
func systemTree(dir string, owner int) string {
	for _, s := range scratchDirs {
		if dir == s {
			return s
		}
		if within(dir, s) {
			return ""
		}
	}
	if varLibService(dir) && owner != 0 {
		// /var/lib/SERVICE/DIR/...: below a service's own directory
		// (which is the service's home, refused as such when it is one),
		// and the service's user's.
		return ""
	}
	first := strings.Split(strings.TrimPrefix(dir, "/"), "/")[0]
	for _, tree := range systemTrees {
		if prefix, glob := strings.CutSuffix(tree, "*"); glob && strings.HasPrefix("/"+first, prefix) || "/"+first == tree {
			return "/" + first
		}
	}
	return ""
}

// varLibService reports whether dir lies below a service's own directory
// under /var/lib (/var/lib/SERVICE/DIR/...), not the system's state there.
func varLibService(dir string) bool {
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	return len(parts) >= 4 && parts[0] == "var" && parts[1] == "lib" && !slices.Contains(varLibSystem, parts[2])
}

// CheckWorkspace refuses workspaces that hand the agent the machine, a
// system tree or a home: the workspace (owned by owner) is writable inside
// the sandbox, so "/" would make everything writable, /usr/local/sbin a
// program root runs, and a home would let the agent append to ~/.bashrc.
func CheckWorkspace(cwd string, owner int, homes []string) error {
	if cwd == "/" {
		return errors.New("the working directory is /, which would make the whole machine writable for the agent: pass --cwd with a project directory")
	}
	if varLibService(cwd) && owner == 0 {
		return fmt.Errorf("the working directory %s is under /var/lib and belongs to root: root's services act on what root owns there (cloud-init's scripts, k3s's manifests, dkms), and the agent would be able to change it. "+
			"Pass --cwd with a project directory elsewhere (a CI service's workspace under /var/lib belongs to the service's own user)", cwd)
	}
	if tree := systemTree(cwd, owner); tree != "" {
		return fmt.Errorf("the working directory %s is in %s, a directory of the system or shared by all users, which the agent would be able to change: pass --cwd with a project directory", cwd, tree)
	}
	// /root is root's home even where root's passwd entry says otherwise.
	for _, h := range append(homes, "/root") {
		if h == "/" {
			continue
		}
		if cwd == h || within(h, cwd) {
			return fmt.Errorf("the working directory %s holds the home %s, which the agent could change (~/.bashrc, ~/.ssh): pass --cwd with a project directory", cwd, h)
		}
	}
	return nil
}
