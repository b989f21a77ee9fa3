package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// OpenWorkspace follows no link on the way (the error names the first),
// opens only a directory, and names it as the kernel does.
func TestOpenWorkspace(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real", "ws")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := OpenWorkspace(real)
	if err != nil || ws.Path != real || ws.UID != os.Getuid() {
		t.Fatalf("OpenWorkspace(%s) = %+v, %v", real, ws, err)
	}
	ws.Close()
	_, err = OpenWorkspace(filepath.Join(base, "link", "ws"))
	var link *LinkError
	if !errors.As(err, &link) || link.Link != filepath.Join(base, "link") || link.Target != filepath.Join(base, "real") {
		t.Errorf("through a link: %v", err)
	}
	if _, err := OpenWorkspace(filepath.Join(base, "file")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("a file: %v", err)
	}
	if _, err := OpenWorkspace("relative"); err == nil {
		t.Errorf("a relative path was opened")
	}
	// Moved after it was opened, it is still the one checked, and its
	// descriptor's /proc name leads to it.
	ws, _ = OpenWorkspace(real)
	defer ws.Close()
	if err := os.Rename(real, real+"-moved"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(ws.ProcPath(), ".")); err != nil || !st.IsDir() {
		t.Errorf("ProcPath: %v", err)
	}
	if _, err := openBeneath(ws.fd(), "../x", 0); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("openBeneath left the directory: %v", err)
	}
}

// The sandbox mounts what the search found, or nothing: a protected path
// replaced meanwhile (by a concurrent agent) fails the start.
func TestWorkspaceMountsAreWhatTheSearchFound(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "a", "repo", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "b", "repo", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := openWS(t, ws)
	g, err := ProtectGit(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workspace: ws, Dir: dir, Protect: g}
	p := &Prepared{}
	mounts, err := p.workspaceMounts(cfg, dir.fd())
	defer p.Close()
	var got []string
	for _, m := range mounts {
		got = append(got, strings.TrimPrefix(m.dest, ws))
		if m.ro != strings.HasSuffix(m.dest, ".git") {
			t.Errorf("%s read-only %v", m.dest, m.ro)
		}
	}
	if err != nil || strings.Join(got, " ") != " /a /b /a/repo /b/repo /a/repo/.git /b/repo/.git" {
		t.Errorf("mounts %q, %v", got, err)
	}
	// The agent of another run swaps two repositories.
	if err := os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ws, "b"), filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ws, "c"), filepath.Join(ws, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Prepared{}).workspaceMounts(cfg, dir.fd()); err == nil || !strings.Contains(err.Error(), "changed while the sandbox started") {
		t.Errorf("swapped: %v", err)
	}
	// Or puts a link where a directory was.
	if err := os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("c", filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Prepared{}).workspaceMounts(cfg, dir.fd()); err == nil {
		t.Errorf("a link was mounted")
	}
}
