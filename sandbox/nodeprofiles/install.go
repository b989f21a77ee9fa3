package nodeprofiles

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Installer puts the profiles on a node: the chart's DaemonSet runs it
// (cmd/agentrun-node-profiles) with the node's directories mounted.
type Installer struct {
	// SeccompRoot is the kubelet's seccomp root (<kubelet root>/seccomp),
	// where a Localhost profile's path starts.
	SeccompRoot string
	// HostRoot is the node's / when the AppArmor profile is to be loaded
	// too; empty leaves AppArmor alone.
	HostRoot string
	// Log reports what changed on the node.
	Log func(format string, args ...any)

	// appArmorLoaded is the text last loaded into the kernel, so that a
	// kernel that lost it (a reload of all profiles) gets it again.
	appArmorLoaded []byte
}

// SeccompPath is where the seccomp profile goes under the seccomp root.
func SeccompPath(root string) string { return filepath.Join(root, SeccompDir, SeccompName) }

// Ensure makes the node hold the current profiles. It is idempotent and
// cheap when nothing changed, so the DaemonSet calls it periodically: a
// profile removed or edited by hand comes back.
func (i *Installer) Ensure() error {
	if err := i.ensureSeccomp(); err != nil {
		return err
	}
	if i.HostRoot != "" {
		return i.ensureAppArmor()
	}
	return nil
}

func (i *Installer) ensureSeccomp() error {
	want := SeccompJSON()
	dst := SeccompPath(i.SeccompRoot)
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("seccomp profile: %w", err)
	}
	if err := writeAtomic(dst, want); err != nil {
		return fmt.Errorf("seccomp profile: %w", err)
	}
	i.logf("wrote the seccomp profile %s", dst)
	return nil
}

// writeAtomic replaces path with data in one rename, so that a container
// starting meanwhile reads the old profile or the new one, never half.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// AppArmorEnabled reports whether the node's kernel enforces AppArmor.
func AppArmorEnabled(hostRoot string) bool {
	b, err := os.ReadFile(filepath.Join(hostRoot, "sys/module/apparmor/parameters/enabled"))
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// AppArmorFor is the profile text a node's AppArmor understands: abi 4.0
// where the node's policy has it (its userns rule is what Ubuntu 24.04
// needs), else the 3.0 variant.
func AppArmorFor(hostRoot string) []byte {
	if _, err := os.Stat(filepath.Join(hostRoot, "etc/apparmor.d/abi/4.0")); err == nil {
		return AppArmor()
	}
	return AppArmor3()
}

// appArmorProfileLoaded reports whether the kernel has a profile of that
// name.
func appArmorProfileLoaded(hostRoot, name string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(hostRoot, "sys/kernel/security/apparmor/profiles"))
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" (") {
			return true, nil
		}
	}
	return false, nil
}

func (i *Installer) ensureAppArmor() error {
	if !AppArmorEnabled(i.HostRoot) {
		if i.appArmorLoaded == nil {
			i.logf("AppArmor is not enabled on this node: no AppArmor profile to load")
			i.appArmorLoaded = []byte{}
		}
		return nil
	}
	want := AppArmorFor(i.HostRoot)
	loaded, err := appArmorProfileLoaded(i.HostRoot, AppArmorName)
	if err != nil {
		return fmt.Errorf("AppArmor profile: %w (securityfs must be mounted at /sys/kernel/security)", err)
	}
	if loaded && bytes.Equal(i.appArmorLoaded, want) {
		return nil
	}
	// The node's own apparmor_parser compiles for the node's kernel; it
	// runs chrooted into the node's root, so its includes (tunables,
	// abstractions) are the node's too. -r replaces a loaded profile.
	parser, err := findParser(i.HostRoot)
	if err != nil {
		return err
	}
	cmd := exec.Command(parser, "-r")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: i.HostRoot}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(want)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("AppArmor profile: apparmor_parser -r: %v: %s", err, bytes.TrimSpace(out))
	}
	i.appArmorLoaded = want
	i.logf("loaded the AppArmor profile %s", AppArmorName)
	return nil
}

// findParser is apparmor_parser's path inside the node's root.
func findParser(hostRoot string) (string, error) {
	for _, p := range []string{"/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"} {
		if _, err := os.Stat(filepath.Join(hostRoot, p)); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", errors.New("AppArmor is enabled but the node has no apparmor_parser (install the apparmor package on the node)")
}

func (i *Installer) logf(format string, args ...any) {
	if i.Log != nil {
		i.Log(format, args...)
	}
}
