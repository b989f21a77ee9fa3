package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	cfg := Config{Workspace: "/tmp/ws", Writable: []string{"/tmp/state"}, ReadOnly: []string{"/tmp/cli", "/tmp/ws/inside"},
		Init: "/usr/bin/agentrun", Proc: HostProc}
	deny := []Deny{{Path: "/home/u/.ssh", IsDir: true}, {Path: "/home/u/.netrc"}}
	got := strings.Join(Args("bwrap", cfg, deny, 4), " ")
	for _, want := range []string{
		"--unshare-user --unshare-ipc --unshare-pid --unshare-uts --unshare-net",
		"--cap-drop ALL --ro-bind / / --dev /dev --ro-bind /proc /proc --tmpfs /tmp",
		"--bind /tmp/state /tmp/state --bind /tmp/ws /tmp/ws --ro-bind /tmp/cli /tmp/cli --ro-bind /usr/bin/agentrun " + InitPath,
		"--perms 0000 --tmpfs /home/u/.ssh --remount-ro /home/u/.ssh --ro-bind /dev/null /home/u/.netrc",
		"--chdir /tmp/ws --seccomp 4 --",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "/tmp/ws/inside") {
		t.Errorf("a read-only path inside the workspace must not shadow it: %s", got)
	}
	if strings.HasSuffix(got, "--") == false {
		t.Errorf("args must end with --: %s", got)
	}
	cfg.Proc = FreshProc
	if got := strings.Join(Args("bwrap", cfg, nil, 4), " "); !strings.Contains(got, "--proc /proc") {
		t.Errorf("fresh proc: %s", got)
	}
}

func TestDefaultDenyRead(t *testing.T) {
	got := DefaultDenyRead("/home/u")
	want := []string{"/home/u/.ssh", "/home/u/.aws", "/home/u/.gnupg", "/home/u/.kube", "/home/u/.docker", "/home/u/.config/gcloud",
		"/home/u/.azure", "/home/u/.netrc", "/home/u/.npmrc", "/home/u/.pypirc", "/home/u/.git-credentials", "/var/run/secrets/kubernetes.io"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("DefaultDenyRead = %v", got)
	}
}

func TestPrepareDenyPlaceholders(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "agentrun-deny-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	existingFile := filepath.Join(base, "file")
	os.WriteFile(existingFile, []byte("x"), 0o600)
	missingDir := filepath.Join(base, "a", "b", "keys")
	missingFile := filepath.Join(base, ".netrc")
	deny, err := PrepareDeny([]string{existingFile, missingDir, missingFile, "/tmp/not-there"})
	if err != nil {
		t.Fatal(err)
	}
	if len(deny) != 3 || deny[0].IsDir || !deny[1].IsDir || deny[2].IsDir {
		t.Errorf("deny = %+v", deny)
	}
	if st, err := os.Stat(missingDir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("no private placeholder directory: %v %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(base, "a")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("placeholder parents must be traversable: %v %v", st, err)
	}
	if st, err := os.Stat(missingFile); err != nil || st.IsDir() || st.Size() != 0 {
		t.Errorf("no empty placeholder file for .netrc: %v %v", st, err)
	}
	// A second run (or a concurrent one) finds them and mounts over them.
	if again, err := PrepareDeny([]string{missingDir, missingFile}); err != nil || len(again) != 2 {
		t.Errorf("second PrepareDeny: %+v %v", again, err)
	}
}

func TestFilterLayout(t *testing.T) {
	prog, err := Filter()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) == 0 || len(prog)%8 != 0 {
		t.Fatalf("program of %d bytes is not a sock_filter array", len(prog))
	}
}
