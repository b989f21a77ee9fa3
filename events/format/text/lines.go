package text

import (
	"strconv"
	"strings"
	"unicode"
)

// PreviewLines is how many non-blank lines of a text event the text format
// shows (docs/events.md, "The text format").
const PreviewLines = 3

// Line is one output line of the text format.
type Line struct {
	// Label is the name inside the brackets: an agent's label ("main",
	// "explore#1") or "end", "result", "note". It is "" for a line written
	// as it is: the continuation lines of a text and the body of [result].
	Label string
	// Agent reports that Label is an agent's label (rich dims only those).
	Agent bool
	// Text is what follows "[Label] ", or the whole line when Label is "".
	Text string
}

// String is the line as the text format writes it (without the newline).
func (l Line) String() string {
	switch {
	case l.Label == "":
		return l.Text
	case l.Text == "":
		return "[" + l.Label + "]"
	}
	return "[" + l.Label + "] " + l.Text
}

// splitLines splits s at every newline: \r\n, \n or \r.
func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			out = append(out, s[start:i])
			start = i + 1
		case '\r':
			out = append(out, s[start:i])
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// isBlank reports whether a line holds only white space.
func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// nonBlankLines returns the lines of s that are not blank, each without its
// trailing white space.
func nonBlankLines(s string) []string {
	var out []string
	for _, l := range splitLines(s) {
		if !isBlank(l) {
			out = append(out, strings.TrimRightFunc(l, unicode.IsSpace))
		}
	}
	return out
}

// TextLines renders a text event of the agent labelled label: blank lines
// skipped, the first line after "text", at most preview-1 more lines
// indented four spaces, then "    … (+N lines)" ("(+1 line)" for one) when
// lines are left over. preview <= 0 shows every line.
func TextLines(label, text string, preview int) []Line {
	lines := nonBlankLines(text)
	if len(lines) == 0 {
		return []Line{{Label: label, Agent: true, Text: "text"}}
	}
	out := []Line{{Label: label, Agent: true, Text: "text " + lines[0]}}
	shown := len(lines)
	if preview > 0 && shown > preview {
		shown = preview
	}
	for _, l := range lines[1:shown] {
		out = append(out, Line{Text: "    " + l})
	}
	if rest := len(lines) - shown; rest > 0 {
		out = append(out, Line{Text: "    … " + plural(rest, "line", "lines")})
	}
	return out
}

// plural writes "(+1 line)" or "(+N lines)".
func plural(n int, one, many string) string {
	if n == 1 {
		return "(+1 " + one + ")"
	}
	return "(+" + strconv.Itoa(n) + " " + many + ")"
}

// ShowResult is the [result] rule of docs/events.md: the result is printed before the
// end line when it has non-blank content and either has more than
// PreviewLines non-blank lines or differs from the main agent's last text
// (compared line by line, ignoring blank lines and trailing white space;
// lastMainText nil means there was none, which differs).
func ShowResult(result, lastMainText *string) bool {
	if result == nil {
		return false
	}
	lines := nonBlankLines(*result)
	if len(lines) == 0 {
		return false
	}
	if len(lines) > PreviewLines || lastMainText == nil {
		return true
	}
	last := nonBlankLines(*lastMainText)
	if len(last) != len(lines) {
		return true
	}
	for i := range lines {
		if lines[i] != last[i] {
			return true
		}
	}
	return false
}

// ResultLines is the [result] line followed by the result as it is, only
// its leading and trailing newlines removed; one Line per "\n"-separated
// line, so that joining them with "\n" gives the result back verbatim.
func ResultLines(result string) []Line {
	body := strings.Trim(result, "\r\n")
	out := []Line{{Label: "result"}}
	for _, l := range strings.Split(body, "\n") {
		out = append(out, Line{Text: l})
	}
	return out
}
