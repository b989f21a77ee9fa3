package docs_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestProjectFilesSpeakForThemselves: no tracked file of the project cites
// a document outside the repository (design notes kept beside a checkout)
// or an absolute path of one machine. A comment that explains a rule by a
// note nobody else can read explains nothing: the project's files cite its
// own docs/ pages.
//
// The patterns are spelled in pieces here so that this file does not match
// them itself.
func TestProjectFilesSpeakForThemselves(t *testing.T) {
	root := repoRoot(t)
	files := trackedFiles(t, root)
	if len(files) < 100 {
		t.Fatalf("only %d project files found", len(files))
	}
	names := map[string]bool{} // the base names of the project's files
	for _, f := range files {
		names[path.Base(f)] = true
	}
	outside := []string{
		".." + "/shared/", // a folder beside the checkout
		"shared" + "/design",
	}
	machine := []string{"/" + "work" + "/"} // where this project's checkouts live on the machine it was built on
	if r, err := filepath.EvalSymlinks(root); err == nil {
		for _, p := range []string{root, r} {
			if strings.Count(p, "/") > 1 {
				machine = append(machine, p)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet in the index
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // binary
		}
		for n, line := range strings.Split(string(b), "\n") {
			where := f + ":" + strconv.Itoa(n+1)
			for _, p := range outside {
				if strings.Contains(line, p) {
					t.Errorf("%s cites %q, outside the repository: cite the docs/ page that holds the fact (write it there)", where, p)
				}
			}
			for _, p := range machine {
				if containsPath(line, p) {
					t.Errorf("%s names %q, a path of one machine: use a path relative to the repository, or an example path", where, p)
				}
			}
			for _, m := range noteName.FindAllStringSubmatch(line, -1) {
				if !names[m[1]] && !otherToolsFiles[m[1]] {
					t.Errorf("%s cites %s, which is not in the repository: cite the docs/ page that holds the fact (write it there)", where, m[1])
				}
			}
		}
	}
}

// noteName is a file name in capitals such as the design notes' (README.md
// is one of the project's own).
var noteName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])([A-Z][A-Z0-9_]+\.md)\b`)

// otherToolsFiles are capitalised file names that other tools define, which
// the project names as theirs: claude-code's and codex's memory files (in
// the CLIs' captured output).
var otherToolsFiles = map[string]bool{"CLAUDE.md": true, "AGENTS.md": true}

// containsPath reports whether line holds the absolute path p at the start
// of a path (not inside a longer one, such as /home/me/work/...).
func containsPath(line, p string) bool {
	for i := 0; ; {
		j := strings.Index(line[i:], p)
		if j < 0 {
			return false
		}
		at := i + j
		if at == 0 || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/~", rune(line[at-1])) {
			return true
		}
		i = at + 1
	}
}

// trackedFiles are the project's files: git's list where this is a
// checkout, else every file below root but the ignored caches and output.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", ".cache", "bin", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
