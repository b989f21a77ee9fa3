// Package text is the text format of docs/events.md: one line per shown event,
// each starting with "[label]", so that grep '^\[explore#1\]' picks out one
// agent. The package also exports the pieces the rich format reuses: the
// Formatter (labels, models per agent, the lines of each event), the number,
// seconds, cost and usage formatting.
//
// Line shapes (LABEL is "main" or a subagent's lowercase kind + "#" +
// number):
//
//	[main] prompt FIRST LINE (+2 images)
//	[LABEL] tool SUMMARY (denied)
//	[LABEL] text FIRST LINE
//	    SECOND LINE
//	    THIRD LINE
//	    … (+4 lines)
//	[PARENT] agent start LABEL (MODEL): DESCRIPTION
//	[LABEL] agent finished 12.4s MODEL  in 14.1k  out 85  cached 69%
//	[main] net denied HOST:PORT (REASON) and 4 more
//	[result]
//	RESULT AS IT IS
//	[end] finished 31.2s  in 65.3k  out 0.9k  cached 64%  $0.0437  session ID  DETAIL
//	[end] rejected DETAIL
//	[note] TEXT
//
// The finer points (docs/events.md, "The text format", states the rules):
//
//   - One space separates the words of a line ("[main] tool X", "agent
//     finished 12.4s MODEL"); two spaces come before the usage and between
//     everything that follows it on a line (usage items, cost, session,
//     detail), as docs/events.md asks for the usage items. Items that are omitted
//     leave no extra spaces, and no line ends in a space.
//   - "(denied)" and "(error)" follow the summary after one space; a denied
//     call shows only "(denied)" (the schema has error false then); error
//     null shows nothing.
//   - prompt shows the first non-blank line of the prompt (a prompt that
//     starts with an empty line would otherwise show nothing); no marker for
//     further lines.
//   - text splits at \r\n, \n and \r, skips blank (white-space only) lines,
//     drops trailing white space of the lines it shows and keeps their
//     leading white space. The "… (+N lines)" line is a continuation line
//     and is indented four spaces like the others; N counts the non-blank
//     lines not shown. A text with no non-blank line is "[LABEL] text".
//   - A line whose parent names no subagent_start seen so far is labelled
//     with the parent id itself.
//   - subagent_start shows the model of the subagent_start event;
//     subagent_end shows the subagent's model by the documented rule (latest
//     usage naming a model, else its subagent_start model). A usage whose
//     model is null does not hide an earlier known model.
//   - network: host and port are joined as Go's net.JoinHostPort does, so
//     an IPv6 host is bracketed ([::1]:443); a denied event without a
//     reason has no parentheses. A summary (suppressed N+1) ends with
//     " and N more"; one that stands for itself alone (suppressed 1) does not.
//   - Seconds have one decimal, the tenths cut (a stopwatch): 31250 ms is
//     31.2s, 12460 ms is 12.4s.
//   - Token numbers use printf's %.1f (correct rounding, exact ties to
//     even) and pick the unit by the value: 912 → 0.9k, 999_999 → 1000.0k,
//     1_000_000 → 1.0M, 1_250_000 → 1.2M. The cached percentage is rounded
//     half up, as docs/events.md says.
//   - detail: all trailing newlines are removed, then each remaining \r\n,
//     \n or \r becomes one space; an empty detail is omitted. A rejected end
//     is "[end] rejected DETAIL" only, without seconds or usage.
//   - [result]: "non-blank content" and "more than 3 lines" count non-blank
//     lines; a run without any main-agent text counts as different. The
//     result is written with only its leading and trailing \r and \n
//     removed; inner lines are written byte for byte (but see Printable).
//   - [note] TEXT is written as given.
//   - Every line goes through Printable: escape sequences and the other
//     control characters but tab and newline are dropped, so that what the
//     agent wrote cannot act on the terminal.
package text

import (
	"io"
	"strings"
	"sync"

	"github.com/agentrun-dev/agentrun/events"
)

// Options configures the text renderer. It has no settings yet; it is there
// so that callers need not change when one is added.
type Options struct{}

// Renderer writes the text format. Every event's lines go out in one Write,
// so an unbuffered writer (a file, a pipe) shows them at once.
type Renderer struct {
	mu  sync.Mutex
	w   io.Writer
	f   *Formatter
	buf strings.Builder
}

// New returns a text renderer on w.
func New(w io.Writer, opts Options) *Renderer {
	return &Renderer{w: w, f: NewFormatter()}
}

// Note writes "[note] TEXT".
func (r *Renderer) Note(text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.write(r.f.Note(text))
}

// Event writes the lines of e, if it has any.
func (r *Renderer) Event(e events.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.write(r.f.Event(e))
}

// Close does nothing: every line is already written.
func (r *Renderer) Close() error { return nil }

func (r *Renderer) write(lines []Line) error {
	if len(lines) == 0 {
		return nil
	}
	r.buf.Reset()
	for _, l := range lines {
		r.buf.WriteString(Printable(l.String()))
		r.buf.WriteByte('\n')
	}
	_, err := io.WriteString(r.w, r.buf.String())
	return err
}
