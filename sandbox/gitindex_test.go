package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// git runs git in dir with a configuration of its own (never the user's,
// nor a home's: HOME is a temporary directory) and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-C", dir}, args...)...)
	home := t.TempDir()
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// gitlinksOf lists the gitlinks git itself sees in the repository at dir.
func gitlinksOf(t *testing.T, dir string) []string {
	var out []string
	for _, line := range strings.Split(git(t, dir, "ls-files", "--stage"), "\n") {
		if mode, rest, ok := strings.Cut(line, " "); ok && mode == "160000" {
			_, name, _ := strings.Cut(rest, "\t")
			out = append(out, name)
		}
	}
	return out
}

// TestReadGitIndex: the gitlinks of indexes as git writes them, in each
// format, are the ones git lists; a split or sparse index says it lists
// only some.
func TestReadGitIndex(t *testing.T) {
	long := strings.Repeat("d/", 2100) + "sub" // longer than the name field holds (0xfff)
	type variant struct {
		name       string
		version    byte
		sha256     bool
		prepare    func(t *testing.T, dir string)
		incomplete string
	}
	version := func(v string) func(*testing.T, string) {
		return func(t *testing.T, dir string) { git(t, dir, "update-index", "--index-version", v) }
	}
	for _, v := range []variant{
		{name: "version 2", version: 2, prepare: version("2")},
		{name: "version 3 (intent to add)", version: 3, prepare: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			git(t, dir, "add", "-N", "new.txt")
		}},
		{name: "version 4", version: 4, prepare: version("4")},
		{name: "version 4 with an offset table", version: 4, prepare: func(t *testing.T, dir string) {
			git(t, dir, "-c", "index.threads=3", "-c", "index.recordOffsetTable=true", "-c", "index.recordEndOfIndexEntries=true",
				"update-index", "--index-version", "4", "--force-write-index")
		}},
		{name: "sha256", version: 2, sha256: true, prepare: version("2")},
		{name: "sha256 version 4", version: 4, sha256: true, prepare: version("4")},
		{name: "split", prepare: func(t *testing.T, dir string) { git(t, dir, "update-index", "--split-index") }, incomplete: "split index"},
		{name: "sparse", prepare: func(t *testing.T, dir string) {
			git(t, dir, "commit", "-q", "-m", "x")
			git(t, dir, "sparse-checkout", "set", "--cone", "--sparse-index", "a")
		}, incomplete: "sparse index"},
	} {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			args, zero := []string{"init", "-q"}, strings.Repeat("1", 40)
			if v.sha256 {
				args, zero = append(args, "--object-format=sha256"), strings.Repeat("1", 64)
			}
			git(t, dir, args...)
			for _, f := range []string{"a/x.txt", "b/y.txt", "top.txt"} {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git(t, dir, "add", ".")
			links := []string{"sub", "b/deep/sub2", long}
			if v.name == "sparse" {
				links = links[:2] // git checks a deep path out slowly
			}
			for _, link := range links {
				git(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+zero+","+link)
			}
			want := gitlinksOf(t, dir)
			v.prepare(t, dir)
			f, err := os.Open(filepath.Join(dir, ".git", "index"))
			if err != nil {
				t.Fatal(err)
			}
			var hdr [8]byte
			if _, err := f.ReadAt(hdr[:], 0); err != nil {
				t.Fatal(err)
			}
			if v.version != 0 && hdr[7] != v.version {
				t.Fatalf("git wrote version %d", hdr[7])
			}
			defer f.Close()
			st, _ := f.Stat()
			hashLen := 20
			if v.sha256 {
				hashLen = 32
			}
			idx, err := readGitIndex(f, st.Size(), hashLen)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(idx.incomplete, v.incomplete) || (v.incomplete == "") != (idx.incomplete == "") {
				t.Errorf("incomplete %q, want %q", idx.incomplete, v.incomplete)
			}
			for _, link := range idx.gitlinks {
				if !slices.Contains(want, link) {
					t.Errorf("gitlink %.40q is none of git's", link)
				}
			}
			if v.incomplete == "" && len(idx.gitlinks) != len(want) {
				t.Errorf("gitlinks %d, git lists %d: %.80q", len(idx.gitlinks), len(want), idx.gitlinks)
			}
		})
	}
}

// TestReadGitIndexRefuses: what is not an index git would read is an error,
// never a partial list taken for a whole one.
func TestReadGitIndexRefuses(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	git(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("1", 40)+",sub")
	good, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte{}, good...)) }
	for name, b := range map[string][]byte{
		"cut short":        good[:40],
		"no signature":     mutate(func(b []byte) []byte { b[0] = 'X'; return b }),
		"version 5":        mutate(func(b []byte) []byte { b[7] = 5; return b }),
		"too many entries": mutate(func(b []byte) []byte { b[8] = 0x7f; return b }),
		"required extension": mutate(func(b []byte) []byte {
			ext := append([]byte("zzzz\x00\x00\x00\x00"), b[len(b)-20:]...)
			return append(b[:len(b)-20], ext...)
		}),
	} {
		_, err := readGitIndex(bytes.NewReader(b), int64(len(b)), 20)
		if !errors.Is(err, errIndex) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if _, err := readGitIndex(bytes.NewReader(good), MaxGitIndexBytes+1, 20); !errors.Is(err, errIndex) {
		t.Errorf("an index over the size bound: %v", err)
	}
	// A name with a NUL inside: git names the file by what comes before.
	b := mutate(func(b []byte) []byte {
		i := bytes.Index(b, []byte("sub\x00"))
		copy(b[i-2:i], []byte{0, 6}) // the name's length: 6 bytes
		copy(b[i:], []byte("sub\x00xy"))
		return b
	})
	if idx, err := readGitIndex(bytes.NewReader(b), int64(len(b)), 20); err != nil || strings.Join(idx.gitlinks, ",") != "sub" {
		t.Errorf("a name with a NUL: %q %v", idx.gitlinks, err)
	}
}

func TestConfigValue(t *testing.T) {
	for conf, want := range map[string]string{
		"[core]\n\tbare = false\n[extensions]\n\tobjectFormat = sha256\n": "sha256",
		"[Extensions]\nobjectformat=\"SHA256\" # comment\n":               "sha256",
		"[extensions] objectformat = sha256\n":                            "sha256",
		"[core]\n\tobjectformat = sha256\n":                               "",
		"[extensions \"x\"]\n\tobjectformat = sha256\n":                   "",
	} {
		if got := configValue([]byte(conf), "extensions", "objectformat"); got != want {
			t.Errorf("configValue(%q) = %q, want %q", conf, got, want)
		}
	}
}
