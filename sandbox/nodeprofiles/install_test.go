package nodeprofiles

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallSeccomp: the profile lands where a Pod's localhostProfile
// agentrun/bwrap.json points, is rewritten when it differs (edited,
// truncated, removed) and left alone when current.
func TestInstallSeccomp(t *testing.T) {
	root := t.TempDir()
	var logs []string
	in := &Installer{SeccompRoot: root, Log: func(f string, a ...any) { logs = append(logs, f) }}
	path := filepath.Join(root, "agentrun", "bwrap.json")
	for _, tc := range []struct {
		name   string
		before func()
		writes bool
	}{
		{"fresh node", func() {}, true},
		{"current", func() {}, false},
		{"edited by hand", func() {
			if err := os.WriteFile(path, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"removed", func() { os.Remove(path) }, true},
		{"directory removed", func() { os.RemoveAll(filepath.Dir(path)) }, true},
	} {
		tc.before()
		logs = nil
		if err := in.Ensure(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, SeccompJSON()) {
			t.Errorf("%s: the profile on the node is not the current one", tc.name)
		}
		if wrote := len(logs) > 0; wrote != tc.writes {
			t.Errorf("%s: wrote %v, want %v", tc.name, wrote, tc.writes)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, %v", tc.name, fi.Mode(), err)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) > 0 {
			t.Errorf("%s: temporary files left: %v", tc.name, left)
		}
	}
}

// TestInstallAppArmor drives the AppArmor half against a node root made
// for the test: its apparmor_parser is a stand-in that records what it was
// given and registers the profile as the kernel would, and it must be run
// inside the node's root (chroot), as the node's own parser is.
func TestInstallAppArmor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root; CI runs the suite as root")
	}
	host := t.TempDir()
	parser := filepath.Join(host, "usr/sbin/apparmor_parser")
	build := exec.Command("go", "build", "-o", parser, "./internal/fakeparser")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in parser: %v\n%s", err, out)
	}
	enabled := filepath.Join(host, "sys/module/apparmor/parameters/enabled")
	profiles := filepath.Join(host, "sys/kernel/security/apparmor/profiles")
	got := filepath.Join(host, "parsed")
	for _, p := range []string{enabled, profiles} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(enabled, []byte("N\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	in := &Installer{SeccompRoot: t.TempDir(), HostRoot: host}
	if err := in.Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(got); err == nil {
		t.Fatal("AppArmor disabled: nothing must be loaded")
	}

	if err := os.WriteFile(enabled, []byte("Y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(profiles, []byte("cri-containerd.apparmor.d (enforce)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := in.Ensure(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, AppArmor3()) {
		t.Errorf("a node without abi 4.0 must get the 3.0 variant; the parser got:\n%s", b)
	}
	if b, _ := os.ReadFile(profiles); !strings.Contains(string(b), AppArmorName+" (enforce)") {
		t.Fatalf("the stand-in did not register the profile: %s", b)
	}

	// Loaded and current: no second load.
	os.Remove(got)
	if err := in.Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(got); err == nil {
		t.Error("a loaded, current profile was loaded again")
	}

	// The kernel lost it (a policy reload), and the node now has abi 4.0.
	if err := os.WriteFile(profiles, []byte("cri-containerd.apparmor.d (enforce)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(host, "etc/apparmor.d/abi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "etc/apparmor.d/abi/4.0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := in.Ensure(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, AppArmor()) {
		t.Errorf("a lost profile must be loaded again, in abi 4.0; the parser got:\n%s", b)
	}

	// A node with AppArmor but no parser: a clear error.
	os.Remove(parser)
	if err := os.WriteFile(profiles, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := in.Ensure(); err == nil || !strings.Contains(err.Error(), "apparmor package") {
		t.Errorf("no parser: %v", err)
	}
}
