package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The helpers here read the documentation as the tests of this package
// check it: the README and every Markdown page under docs/, each split
// into its prose and its fenced code blocks.

// page is one Markdown file of the documentation.
type page struct {
	path  string   // relative to the repository root, with slashes
	prose string   // everything outside fenced code blocks
	code  []string // the bodies of its fenced code blocks
}

// repoRoot is the repository's top directory (this package is docs/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// generatedPages are documentation that a tool writes from the code:
// naming a field or a flag there says nothing about whether a person
// explained it.
var generatedPages = map[string]bool{"docs/api.md": true}

// readPages reads README.md and docs/**/*.md, the generated ones too when
// withGenerated.
func readPages(t *testing.T, withGenerated bool) []page {
	t.Helper()
	root := repoRoot(t)
	paths := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pages []page
	for _, p := range paths {
		if generatedPages[p] && !withGenerated {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, splitPage(p, string(b)))
	}
	return pages
}

// fence opens or closes a fenced code block (``` or ~~~, indented or not,
// as in a list item).
var fence = regexp.MustCompile("^\\s*(```|~~~)")

// splitPage separates a page's prose from its fenced code blocks.
func splitPage(path, text string) page {
	pg := page{path: path}
	var prose, block []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			if in {
				pg.code = append(pg.code, strings.Join(block, "\n"))
				block = nil
			}
			in = !in
			prose = append(prose, "")
			continue
		}
		if in {
			block = append(block, line)
		} else {
			prose = append(prose, line)
		}
	}
	pg.prose = strings.Join(prose, "\n")
	return pg
}
