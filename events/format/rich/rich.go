// Package rich is the rich format of docs/events.md: on a terminal, a dynamic UI
// of three areas; elsewhere exactly the text format.
//
//   - The scroll area: the lines of the text format (format/text), written
//     into the terminal's scrollback. The RecentTexts latest texts, each
//     with the lines that came after it, are drawn above the panel and
//     redrawn with it; when a fourth text comes, the oldest keeps only its
//     first line and goes into the scrollback with the lines after it.
//   - The subagent list, once a subagent has appeared: one line per running
//     subagent (spinner, label, model, description, current tool, elapsed
//     time, context of its latest usage) or "0 running".
//   - The status bar: spinner, "main" and its model, the main agent's
//     current tool, the elapsed time, the usage so far (in and cached) and
//     the main agent's context.
//
// The finer points (docs/events.md, "The rich format", states the rules):
//
//   - "The 3 most recent texts in text form, multi-line": each recent text
//     is drawn as the text format draws it (first line after "text", up to
//     two more lines indented, "… (+N lines)"), and that is also what is
//     written "in full" for the texts left at the end; a collapsed text is
//     its first line only. The text format's cap keeps three texts and the
//     panel within most terminals; the [result] rule (applied here as in
//     text) shows a final answer that the preview cut.
//   - When the recent texts and the panel are taller than the terminal, the
//     oldest texts collapse first, down to none (a single text taller than
//     the terminal collapses too).
//   - Lines are written with "\r\n". Every line rich draws has its tabs
//     turned into four spaces and its other control characters dropped
//     (they would move the cursor and break the row count); text keeps them.
//   - Panel items are two spaces apart, as on the end line; label and model
//     one space apart, as in "agent finished 12.4s MODEL". Labels in the
//     panel have no brackets. The context of an agent is "ctx N" (N as the
//     token numbers), left out when its latest usage had none. Elapsed
//     times are seconds with one decimal, as in text, counted from New for
//     main and from the subagent_start for a subagent (wall clock, not the
//     events' time fields).
//   - The subagent line uses at most the terminal width: the description is
//     cut first (with "…"), then the tool, then the whole line. The status
//     bar uses at most width-3 columns: the tool first, then the whole line.
//     When the list does not fit the terminal, its last shown line is
//     "… N more running".
//   - The separator is a row of "─" across the terminal, dim.
//   - Dim (SGR 2, ended by SGR 22) is used for the agent labels of scroll
//     lines ("[main]", "[explore#1]", brackets included) and the separator;
//     [end], [result] and [note] are not agents' labels and stay plain.
//   - The panel first appears at the first redraw (first tick or first
//     scroll line); the cursor is hidden then and shown again at the end.
//     A run whose end comes before any redraw (rejected) never hides it.
//   - The end event ends the UI at once: panel erased, pending stderr
//     line, remaining texts, [result], end line. Close without an end event
//     does the same without the last two.
//   - Stderr lines (StderrWriter) are scroll lines like the others: a line
//     after a recent text stays with that text's block.
package rich

import (
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// Clock is the time source of the redraws, the spinner and the elapsed
// times; tests replace it.
type Clock interface {
	Now() time.Time
	// Ticker returns a channel that receives every d, and the function
	// that stops it.
	Ticker(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Options configures the rich renderer.
type Options struct {
	// Clock drives the redraws; nil is the real clock.
	Clock Clock
}

// Renderer is the rich format. It implements format.Renderer.
type Renderer struct {
	text   *text.Renderer // when stdout is not a terminal
	live   *live          // when it is
	stderr *os.File
	errW   io.Writer
}

// New returns the rich renderer: the dynamic UI when stdout is a terminal,
// the text format otherwise. NO_COLOR (set and not empty) turns off the dim
// labels and separator.
func New(stdout, stderr *os.File, opts Options) *Renderer {
	r := &Renderer{stderr: stderr}
	if !isTerminal(stdout) {
		r.text = text.New(stdout, text.Options{})
		return r
	}
	clock := opts.Clock
	if clock == nil {
		clock = realClock{}
	}
	size := func() (int, int) {
		w, h, err := term.GetSize(int(stdout.Fd()))
		if err != nil {
			return 0, 0
		}
		return w, h
	}
	r.live = newLive(stdout, stderr, size, clock, os.Getenv("NO_COLOR") != "")
	if isTerminal(stderr) {
		r.errW = stderrWriter{r.live}
	}
	return r
}

func isTerminal(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }

// Interactive reports whether the dynamic UI is drawn (stdout is a
// terminal).
func (r *Renderer) Interactive() bool { return r.live != nil }

// StderrWriter is where the runtime's stderr and agentrun's own stderr
// lines should go: when both stdout and stderr are terminals, a writer that
// inserts whole lines into the scroll area (the incomplete last line comes
// out at the end); otherwise stderr itself.
func (r *Renderer) StderrWriter() io.Writer {
	if r.errW != nil {
		return r.errW
	}
	if r.stderr == nil {
		return io.Discard
	}
	return r.stderr
}

// Note writes a [note] line.
func (r *Renderer) Note(s string) error {
	if r.live == nil {
		return r.text.Note(s)
	}
	return r.live.note(s)
}

// Partial shows text an agent is writing in the live view (format.Live);
// the text format has nothing to show for it.
func (r *Renderer) Partial(p events.Partial) error {
	if r.live == nil {
		return nil
	}
	return r.live.partial(p)
}

// Event renders e.
func (r *Renderer) Event(e events.Event) error {
	if r.live == nil {
		return r.text.Event(e)
	}
	return r.live.event(e)
}

// Close ends the dynamic UI (panel erased, cursor shown); Close twice is
// harmless.
func (r *Renderer) Close() error {
	if r.live == nil {
		return r.text.Close()
	}
	return r.live.close()
}

type stderrWriter struct{ l *live }

func (w stderrWriter) Write(p []byte) (int, error) { return w.l.writeStderr(p) }
