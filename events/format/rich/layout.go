package rich

import (
	"strconv"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// The layout functions are pure: given what the panel shows and the
// terminal's size they return the lines to draw, without styling (the
// caller dims the separator).

// spinner is the animation, one frame per 100 ms.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Frame is the animation period, and the redraw period.
const Frame = 100 * time.Millisecond

// statusMargin is how many columns the status bar leaves free, so that the
// ^C the terminal echoes at the cursor does not wrap to a new row.
const statusMargin = 3

// agentRow is what the panel shows about one agent.
type agentRow struct {
	label   string
	model   string        // "" when unknown
	desc    string        // subagents only
	tool    string        // summary of the agent's current tool, "" for none
	elapsed time.Duration // since the agent started
	context *int64        // context_tokens of its latest usage
}

// panelState is everything the panel shows.
type panelState struct {
	frame    int                // spinner frame
	main     agentRow           // the status bar's agent
	usage    events.TokenCounts // sum of every usage event so far
	subsSeen bool               // a subagent has started: the list is shown
	subs     []agentRow         // running subagents in start order
	writing  *writingRow        // what an agent is writing, nil for nothing
}

// writingRow is what the panel shows of the text an agent is writing.
type writingRow struct {
	label string
	chars int      // characters written so far
	lines []string // its last lines, oldest first
}

// writingLines is the panel's part for w: "LABEL writing… N chars", then
// its last lines indented, each cut to width.
func writingLines(w *writingRow, width int) []string {
	if w == nil {
		return nil
	}
	out := []string{truncate(w.label+" writing… "+strconv.Itoa(w.chars)+" chars", width)}
	for _, ln := range w.lines {
		out = append(out, truncate("    "+sanitize(ln), width))
	}
	return out
}

func spin(frame int) string {
	if frame < 0 {
		frame = -frame
	}
	return spinner[frame%len(spinner)]
}

func elapsed(d time.Duration) string { return text.FormatSeconds(d.Milliseconds()) }

func contextItem(n *int64) string {
	if n == nil {
		return ""
	}
	return "ctx " + text.FormatTokens(*n)
}

// fitCut joins head, cut and tail (two spaces apart) in at most max
// columns, cutting cut (with "…") or, when not even two columns are left
// for it, leaving it out. The caller cuts the whole line afterwards if it is
// still too wide.
func fitCut(head, cut, tail string, max int) string {
	line := text.JoinItems(head, cut, tail)
	if cut == "" || stringWidth(line) <= max {
		return line
	}
	rest := stringWidth(text.JoinItems(head, tail))
	avail := max - rest - 2 // the two spaces before cut
	if avail < 2 {
		return text.JoinItems(head, tail)
	}
	return text.JoinItems(head, truncate(cut, avail), tail)
}

// statusLine is the status bar: spinner, "main" and its model, the main
// agent's current tool, the elapsed time, the cumulative usage (in and
// cached only) and the main agent's context. It uses at most width-3
// columns: the tool is cut first, then the whole line.
func statusLine(st panelState, width int) string {
	max := width - statusMargin
	if max < 1 {
		max = 1
	}
	head := text.JoinWords(spin(st.frame), st.main.label, st.main.model)
	in, _, cached := text.UsageItems(st.usage)
	tail := text.JoinItems(elapsed(st.main.elapsed), in, cached, contextItem(st.main.context))
	return truncate(fitCut(head, sanitize(st.main.tool), tail, max), max)
}

// subagentLine is one running subagent: spinner, label, model,
// description, its current tool, its elapsed time and its context. It
// uses at most width columns: the description is cut first, then the tool,
// then the whole line.
func subagentLine(a agentRow, frame, width int) string {
	if width < 1 {
		width = 1
	}
	head := text.JoinWords(spin(frame), a.label, a.model)
	tool := sanitize(a.tool)
	tail := text.JoinItems(elapsed(a.elapsed), contextItem(a.context))
	line := fitCut(head, sanitize(a.desc), text.JoinItems(tool, tail), width)
	if stringWidth(line) > width {
		line = fitCut(head, tool, tail, width)
	}
	return truncate(line, width)
}

// panelLines is the panel: the separator, the subagent list (once a
// subagent has appeared: one line per running one, or "0 running") and the
// status bar. It never has more than height lines: when the list does not
// fit, its last shown line says how many more are running.
func panelLines(st panelState, width, height int) []string {
	if width < 1 {
		width = 1
	}
	out := []string{strings.Repeat("─", width)}
	if st.subsSeen {
		room := height - 2
		switch {
		case len(st.subs) == 0:
			if room >= 1 {
				out = append(out, "0 running")
			}
		case len(st.subs) <= room:
			for _, a := range st.subs {
				out = append(out, subagentLine(a, st.frame, width))
			}
		case room >= 1:
			for _, a := range st.subs[:room-1] {
				out = append(out, subagentLine(a, st.frame, width))
			}
			more := len(st.subs) - (room - 1)
			out = append(out, truncate("… "+strconv.Itoa(more)+" more running", width))
		}
	}
	out = append(out, statusLine(st, width))
	// What an agent is writing goes under the separator when it fits;
	// else its last lines, down to none.
	if wl := writingLines(st.writing, width); len(wl) > 0 {
		room := len(wl)
		if height >= 1 && len(out)+room > height {
			room = max(0, height-len(out))
		}
		wl = wl[len(wl)-room:]
		out = append(append(append([]string{}, out[0]), wl...), out[1:]...)
	}
	if height >= 1 && len(out) > height {
		out = out[len(out)-height:] // a terminal too short even for the separator
	}
	return out
}

// blockRows is the number of rows a block of lines takes.
func blockRows(lines []string, width int) int {
	n := 0
	for _, l := range lines {
		n += rows(l, width)
	}
	return n
}

// foldCount is how many of the oldest blocks must collapse (go to the
// scrollback) so that the remaining blocks and panelRows rows fit in
// height rows.
func foldCount(blocks [][]string, panelRows, width, height int) int {
	total := panelRows
	sizes := make([]int, len(blocks))
	for i, b := range blocks {
		sizes[i] = blockRows(b, width)
		total += sizes[i]
	}
	n := 0
	for n < len(blocks) && total > height {
		total -= sizes[n]
		n++
	}
	return n
}
