package rich

import (
	"strings"
	"unicode"

	"golang.org/x/text/width"

	"github.com/agentrun-dev/agentrun/events/format/text"
)

// runeWidth is the number of terminal columns r takes, as wcwidth counts
// them: East Asian wide and fullwidth characters take two, combining marks
// and format characters none, everything else one. Control characters are
// removed by sanitize before anything is measured.
func runeWidth(r rune) int {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return 0
	case r == 0x200b || (r >= 0x1160 && r <= 0x11ff): // zero width space, Hangul jamo vowels and finals
		return 0
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// stringWidth is the number of columns s takes.
func stringWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

// truncate cuts s to at most w columns, ending it with "…" when it was cut.
func truncate(s string, w int) string {
	if stringWidth(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		rw := runeWidth(r)
		if n+rw > w-1 {
			break
		}
		b.WriteRune(r)
		n += rw
	}
	b.WriteString("…")
	return b.String()
}

// rows is the number of terminal rows s takes on a terminal w columns wide
// (at least one): a wide character that does not fit in the last column
// goes to the next row, as terminals do.
func rows(s string, w int) int {
	if w <= 0 {
		return 1
	}
	n, col := 1, 0
	for _, r := range s {
		rw := runeWidth(r)
		if col+rw > w {
			n++
			col = 0
		}
		col += rw
	}
	return n
}

// sanitize makes s safe to draw: text.Printable's filter (control
// characters, escape sequences and invalid bytes are dropped), then tabs
// become four spaces and newlines are dropped, since they would move the
// cursor or break the row count.
func sanitize(s string) string {
	s = text.Printable(s)
	if strings.ContainsAny(s, "\t\n") {
		s = tabsAndNewlines.Replace(s)
	}
	return s
}

var tabsAndNewlines = strings.NewReplacer("\t", "    ", "\n", "")
