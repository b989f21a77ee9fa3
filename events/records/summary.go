package records

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxSummary is the longest summary in characters (docs/events.md, "tool_start").
const MaxSummary = 120

// Summary builds the one-line summary of a tool call, "Name: detail" or
// just "Name", collapsed to one line and cut to MaxSummary characters with
// an ellipsis.
func Summary(name, detail string) string {
	detail = OneLine(detail)
	if detail == "" {
		return Truncate(OneLine(name), MaxSummary)
	}
	return Truncate(OneLine(name)+": "+detail, MaxSummary)
}

// OneLine collapses every run of whitespace (newlines included) into one
// space and trims the ends. Invalid UTF-8 becomes U+FFFD.
func OneLine(s string) string {
	if isOneLine(s) {
		return s // most names and details: no copy
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || r == '\u2028' || r == '\u2029' || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isOneLine reports whether OneLine gives s as it is: printable ASCII
// only, no space at either end and never two together.
func isOneLine(s string) bool {
	if s != "" && (s[0] == ' ' || s[len(s)-1] == ' ') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || (c == ' ' && s[i+1] == ' ') {
			return false
		}
	}
	return true
}

// Truncate cuts s to at most max characters, the last being "…" when cut.
func Truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return strings.TrimRightFunc(s[:i], unicode.IsSpace) + "…"
		}
		n++
	}
	return s
}
