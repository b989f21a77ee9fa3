package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLeftRepositories: every form of repository git would find that the
// agent leaves is told, erring wide (git's own test accepts more HEAD
// spellings and linked objects and refs than a plain `git init` makes);
// what was there at the start, or read-only, is not.
func TestLeftRepositories(t *testing.T) {
	file := func(p, content string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bare := func(dir, head string) {
		if err := os.MkdirAll(filepath.Join(dir, "objects"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "refs"), 0o755); err != nil {
			t.Fatal(err)
		}
		file(filepath.Join(dir, "HEAD"), head)
	}
	// What some cases have in the workspace at the start.
	before := map[string]func(t *testing.T, ws string){
		"a .git link below the top replaced with a repository": func(t *testing.T, ws string) {
			other := t.TempDir()
			git(t, other, "init", "-q")
			if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(other, ".git"), filepath.Join(ws, "sub", ".git")); err != nil {
				t.Fatal(err)
			}
		},
		"a .git link below the top left as it was": func(t *testing.T, ws string) {
			if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/nowhere", filepath.Join(ws, "sub", ".git")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, tt := range []struct {
		name  string
		after func(ws string)
		want  []string
	}{
		{"nothing new", func(string) {}, nil},
		{"git init", func(ws string) { git(t, ws, "init", "-q", "tools") }, []string{"tools/.git"}},
		{"git init --bare", func(ws string) { git(t, ws, "init", "-q", "--bare", "r.git") }, []string{"r.git"}},
		{"a .git file", func(ws string) { file(filepath.Join(ws, "a", ".git"), "gitdir: /elsewhere\n") }, []string{"a/.git"}},
		{"a .git link", func(ws string) {
			if err := os.MkdirAll(filepath.Join(ws, "b"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/tmp", filepath.Join(ws, "b", ".git")); err != nil {
				t.Fatal(err)
			}
		}, []string{"b/.git"}},
		{"HEAD without a blank", func(ws string) { bare(filepath.Join(ws, "c"), "ref:refs/heads/main\n") }, []string{"c"}},
		{"HEAD with a tab", func(ws string) { bare(filepath.Join(ws, "d"), "ref:\trefs/heads/main\n") }, []string{"d"}},
		{"HEAD an object name in capitals", func(ws string) { bare(filepath.Join(ws, "e"), strings.Repeat("AB", 20)+" trailing\n") }, []string{"e"}},
		{"HEAD a link", func(ws string) {
			bare(filepath.Join(ws, "f"), "")
			os.Remove(filepath.Join(ws, "f", "HEAD"))
			if err := os.Symlink("refs/heads/main", filepath.Join(ws, "f", "HEAD")); err != nil {
				t.Fatal(err)
			}
		}, []string{"f"}},
		{"objects and refs linked", func(ws string) {
			file(filepath.Join(ws, "src", "HEAD"), "ref: refs/heads/main\n")
			if err := os.Symlink("../.git/objects", filepath.Join(ws, "src", "objects")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../.git/refs", filepath.Join(ws, "src", "refs")); err != nil {
				t.Fatal(err)
			}
		}, []string{"src"}},
		{"commondir", func(ws string) {
			file(filepath.Join(ws, "docs", "HEAD"), "ref: refs/heads/main\n")
			file(filepath.Join(ws, "docs", "commondir"), "../c\n")
		}, []string{"docs"}},
		{"the workspace itself", func(ws string) { bare(ws, "ref: refs/heads/main\n") }, []string{"."}},
		{"not a repository: HEAD of another kind", func(ws string) { bare(filepath.Join(ws, "g"), "hello\n") }, nil},
		{"a .git link below the top replaced with a repository", func(ws string) {
			os.Remove(filepath.Join(ws, "sub", ".git"))
			git(t, filepath.Join(ws, "sub"), "init", "-q")
		}, []string{"sub/.git"}},
		{"a .git link below the top left as it was", func(string) {}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			git(t, ws, "init", "-q")
			git(t, ws, "init", "-q", "--bare", "fixtures/remote.git")
			if err := os.MkdirAll(filepath.Join(ws, "old"), 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, filepath.Join(ws, "old"), "init", "-q")
			if b := before[tt.name]; b != nil {
				b(t, ws)
			}
			dir := openWS(t, ws)
			g, err := ProtectGit(dir)
			if err != nil {
				t.Fatal(err)
			}
			tt.after(ws)
			left, unchecked, complete := LeftRepositories(dir, g)
			if !slices.Equal(left, tt.want) || len(unchecked) > 0 || !complete {
				t.Errorf("LeftRepositories = %q, %q, %v; want %q", left, unchecked, complete, tt.want)
			}
		})
	}
}
