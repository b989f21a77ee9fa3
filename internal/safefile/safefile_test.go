package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fixture is a workspace an agent wrote, next to a host secret.
func fixture(t *testing.T) (ws, secret string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	secret = filepath.Join(base, "id_rsa")
	must(t, os.MkdirAll(filepath.Join(ws, "sessions", "claude-code"), 0o755))
	must(t, os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "ok.jsonl"), []byte("transcript"), 0o600))
	must(t, os.Symlink(secret, filepath.Join(ws, "link.jsonl")))
	must(t, os.Symlink(filepath.Dir(secret), filepath.Join(ws, "linkdir")))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600))
	return ws, secret
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesPlantedLinks(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	tests := []struct {
		name string
		path string
		want error
	}{
		{"regular file", filepath.Join(ws, "ok.jsonl"), nil},
		{"link as the file", filepath.Join(ws, "link.jsonl"), ErrLink},
		{"link on the way", filepath.Join(ws, "linkdir", "id_rsa"), ErrLink},
		{"fifo", filepath.Join(ws, "fifo"), ErrNotRegular},
		{"directory", filepath.Join(ws, "sessions"), ErrNotRegular},
		{"outside: the caller's own path", secret, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := g.ReadFile(tt.path)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("ReadFile: %v", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("ReadFile = %q, %v; want %v", b, err, tt.want)
			case tt.want != nil && strings.Contains(string(b), "PRIVATE"):
				t.Fatalf("the secret was read")
			}
		})
	}
}

func TestCreateDoesNotWriteThroughLinks(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	for _, p := range []string{filepath.Join(ws, "link.jsonl"), filepath.Join(ws, "linkdir", "id_rsa")} {
		if f, err := g.Create(p, 0o600); err == nil {
			f.WriteString("agent text")
			f.Close()
			t.Errorf("Create %s went through a link", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY" {
		t.Fatalf("the host file was changed: %q", b)
	}
	f, err := g.Create(filepath.Join(ws, "new", "deeper", "events.jsonl"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x")
	f.Close()
	if st, err := os.Stat(filepath.Join(ws, "new")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("missing directories are made private: %v %v", st, err)
	}
	// Truncates an existing regular file.
	must(t, os.WriteFile(filepath.Join(ws, "old"), []byte("long old content"), 0o600))
	f, err = g.Create(filepath.Join(ws, "old"), 0o600)
	must(t, err)
	f.WriteString("new")
	f.Close()
	if b, _ := os.ReadFile(filepath.Join(ws, "old")); string(b) != "new" {
		t.Errorf("Create must truncate: %q", b)
	}
}

func TestWriteFileReplacesALinkInsteadOfFollowingIt(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	dst := filepath.Join(ws, "sessions", "claude-code", "abc.jsonl")
	// A planted temporary file name and a link at the destination.
	must(t, os.Symlink(secret, dst))
	must(t, os.Symlink(secret, dst+".tmp"))
	must(t, g.WriteFile(dst, strings.NewReader("session"), 0o600))
	if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY" {
		t.Fatalf("the host file was overwritten: %q", b)
	}
	st, err := os.Lstat(dst)
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the destination is not a regular file now: %v %v", st, err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "session" {
		t.Errorf("content %q", b)
	}
	if err := g.WriteFile(filepath.Join(ws, "linkdir", "x"), strings.NewReader("x"), 0o600); !errors.Is(err, ErrLink) {
		t.Errorf("a linked directory on the way must be refused: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(secret), "x")); err == nil {
		t.Errorf("a file appeared outside the workspace")
	}
}

func TestOutermostUntrustedDirectoryWins(t *testing.T) {
	ws, secret := fixture(t)
	// The agent replaced an inner untrusted directory with a link.
	must(t, os.Symlink(filepath.Dir(secret), filepath.Join(ws, "state")))
	g := Guard{Untrusted: []string{filepath.Join(ws, "state"), ws}}
	if _, err := g.ReadFile(filepath.Join(ws, "state", "id_rsa")); !errors.Is(err, ErrLink) {
		t.Errorf("the walk must start at the outermost untrusted directory: %v", err)
	}
}
