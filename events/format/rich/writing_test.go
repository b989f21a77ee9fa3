package rich

import (
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

// TestLiveShowsWriting: text an agent streams before its text event shows
// under the separator (its last lines, the characters so far) at the next
// redraw, and goes when its text event comes; the scrollback never holds
// it, so the end leaves exactly the text format's lines.
func TestLiveShowsWriting(t *testing.T) {
	h := newHarness(t, 60, 20, true)
	h.feed(&events.Start{Runtime: "claude-code", Sandbox: "bubblewrap", Network: events.Network{Mode: "full", Allow: []string{}}, DenyRead: []string{}, Argv: []string{"claude"}, Env: []string{}})
	for _, piece := range []string{"First line\n", "second ", "line\nthird\n", "fourth, a very long line that does not fit in sixty columns at all"} {
		if err := h.l.partial(events.Partial{Text: piece}); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.tick()
	screen := h.term.lines()
	want := []string{
		strings.Repeat("─", 60),
		"main writing… 95 chars",
		"    second line",
		"    third",
		"    fourth, a very long line that does not fit in sixty col…",
	}
	if n := len(screen); n < len(want)+1 || strings.Join(screen[n-len(want)-1:n-1], "\n") != strings.Join(want, "\n") {
		t.Fatalf("screen:\n%s\nwant before the status bar:\n%s", strings.Join(screen, "\n"), strings.Join(want, "\n"))
	}
	h.feed(&events.Text{Text: "First line\nsecond line\nthird\nfourth"})
	h.clock.tick()
	if s := strings.Join(h.term.lines(), "\n"); strings.Contains(s, "writing…") {
		t.Errorf("still writing after the text event:\n%s", s)
	}
	// A subagent's piece replaces main's; its tool call ends it.
	sub := "toolu_1"
	h.feed(&events.SubagentStart{ID: sub, Number: 1, Kind: "Explore", Description: "look"})
	if err := h.l.partial(events.Partial{Parent: &sub, Text: "looking"}); err != nil {
		t.Fatal(err)
	}
	h.clock.tick()
	if s := strings.Join(h.term.lines(), "\n"); !strings.Contains(s, "explore#1 writing… 7 chars\n    looking") {
		t.Errorf("the subagent's writing:\n%s", s)
	}
	h.feed(&events.ToolStart{ID: "t1", Parent: &sub, Name: "Read", Summary: "Read: a"})
	h.clock.tick()
	if s := strings.Join(h.term.lines(), "\n"); strings.Contains(s, "writing…") {
		t.Errorf("still writing after the tool call:\n%s", s)
	}
}

// TestWritingBounded: a long stream keeps only its tail.
func TestWritingBounded(t *testing.T) {
	var w writing
	for i := 0; i < 10000; i++ {
		w.add("é line\n")
	}
	if len(w.tail) > writingKeep || w.chars != 70000 {
		t.Errorf("kept %d bytes, counted %d chars", len(w.tail), w.chars)
	}
	if got := w.last(WritingLines); len(got) != 3 || got[2] != "é line" {
		t.Errorf("last lines %q", got)
	}
}

// TestPanelWritingFitsHeight: on a short terminal the writing lines go
// first, oldest first.
func TestPanelWritingFitsHeight(t *testing.T) {
	st := panelState{main: agentRow{label: "main"}, writing: &writingRow{label: "main", chars: 5, lines: []string{"a", "b", "c"}}}
	if got := panelLines(st, 40, 4); len(got) != 4 || got[1] != "    b" || got[2] != "    c" {
		t.Errorf("height 4: %q", got)
	}
	if got := panelLines(st, 40, 2); len(got) != 2 || strings.Contains(strings.Join(got, "\n"), "writing") {
		t.Errorf("height 2: %q", got)
	}
}
