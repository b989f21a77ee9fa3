package rich

import (
	"strings"
	"unicode/utf8"
)

// WritingLines is how many of the last lines of the text an agent is
// writing the panel shows (docs/events.md, "The rich format").
const WritingLines = 3

// writingKeep bounds what is kept of the text being written: the last
// lines are all the panel shows.
const writingKeep = 4096

// writing is the text one agent is writing, as the runtime streams it.
type writing struct {
	agent string // "" for main, else the subagent id
	label string
	chars int    // characters written so far
	tail  string // the last writingKeep bytes at most
}

func (w *writing) add(s string) {
	w.chars += utf8.RuneCountInString(s)
	w.tail += s
	if len(w.tail) > writingKeep {
		cut := len(w.tail) - writingKeep
		for cut < len(w.tail) && !utf8.RuneStart(w.tail[cut]) {
			cut++
		}
		w.tail = w.tail[cut:]
	}
}

// last is the last n lines that hold something, oldest first.
func (w *writing) last(n int) []string {
	var out []string
	lines := strings.Split(w.tail, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if strings.TrimSpace(lines[i]) != "" {
			out = append([]string{lines[i]}, out...)
		}
	}
	return out
}
