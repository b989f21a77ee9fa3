package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestLinksResolve: every relative link of the documentation (README.md
// and docs/, the generated reference included) leads to a file of the
// repository, and every #anchor to a heading of the page it names, as
// GitHub makes anchors from headings. Pages move; their links must follow.
func TestLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages := readPages(t, true)
	anchors := map[string]map[string]bool{} // page path → its anchors
	anchorsOf := func(p string) map[string]bool {
		if a, ok := anchors[p]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil
		}
		anchors[p] = headingAnchors(splitPage(p, string(b)).prose)
		return anchors[p]
	}
	links := 0
	for _, pg := range pages {
		// A link inside a code span is text (a regular expression's "](",
		// in the API reference's patterns).
		prose := codeSpan.ReplaceAllString(pg.prose, "")
		for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			dest := pg.path
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(pg.path), file)))
			}
			if strings.HasPrefix(dest, "../") {
				t.Errorf("%s: link %s leaves the repository", pg.path, target)
				continue
			}
			info, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest)))
			if err != nil {
				t.Errorf("%s: link %s: %s does not exist", pg.path, target, dest)
				continue
			}
			if anchor == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %s: an anchor into %s, which is not a Markdown page", pg.path, target, dest)
				continue
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with the anchor #%s", pg.path, target, dest, anchor)
			}
		}
	}
	if links < 50 {
		t.Errorf("only %d relative links found in the documentation: is the link pattern still right?", links)
	}
}

// mdLink is an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// headingAnchors are the anchors GitHub gives the headings of prose: the
// heading's text in lower case, without what is neither a letter, a digit,
// a space, a hyphen nor an underscore, spaces made hyphens; a repeated one
// gets -1, -2, ...
func headingAnchors(prose string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(prose, "\n") {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if text == "" || text[0] != ' ' {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
