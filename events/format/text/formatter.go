package text

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode"

	"github.com/agentrun-dev/agentrun/events"
)

// MainLabel is the main agent's label.
const MainLabel = "main"

// Formatter turns events into text-format lines and keeps what the lines
// depend on: the label of every subagent, the model of every agent and the
// main agent's last text. rich takes its labels and models from here, so
// both formats show the same ones (docs/events.md, "The rich format").
//
// A Formatter is not safe for concurrent use.
type Formatter struct {
	startModel   string
	mainModel    string // model of the main agent's latest usage with a model
	agents       map[string]*agent
	lastMainText *string
}

type agent struct {
	label      string
	startModel string
	usageModel string
}

// NewFormatter returns a Formatter with no events seen.
func NewFormatter() *Formatter { return &Formatter{agents: map[string]*agent{}} }

// Label is the label of the agent whose events carry parent: "main" for
// nil, the subagent's label ("explore#1") for the id of its subagent_start.
// An id that no subagent_start announced is shown as itself.
func (f *Formatter) Label(parent *string) string {
	if parent == nil {
		return MainLabel
	}
	if a := f.agents[*parent]; a != nil {
		return a.label
	}
	return *parent
}

// Model is the model shown for the agent whose events carry parent: the
// model of its latest usage event that named one, else the model of its
// subagent_start (for the main agent: of start), else "".
func (f *Formatter) Model(parent *string) string {
	if parent == nil {
		if f.mainModel != "" {
			return f.mainModel
		}
		return f.startModel
	}
	if a := f.agents[*parent]; a != nil {
		if a.usageModel != "" {
			return a.usageModel
		}
		return a.startModel
	}
	return ""
}

// LastMainText is the text of the main agent's last text event, nil before
// the first.
func (f *Formatter) LastMainText() *string { return f.lastMainText }

// SubagentLabel is the label of a subagent: its kind in lower case, "#" and
// its number ("explore#1").
func SubagentLabel(kind string, number int) string {
	return strings.ToLower(kind) + "#" + strconv.Itoa(number)
}

// Note is the line of a [note].
func (f *Formatter) Note(text string) []Line {
	return []Line{{Label: "note", Text: text}}
}

// Event records what e changes and returns the lines the text format shows
// for it, none for the events it does not show (start, tool_start, usage,
// allowed network connections, unknown types).
func (f *Formatter) Event(e events.Event) []Line {
	switch e := e.(type) {
	case *events.Start:
		f.startModel = str(e.Model)
	case *events.Prompt:
		return []Line{f.prompt(e)}
	case *events.Tool:
		t := "tool " + e.Summary
		switch {
		case e.Denied:
			t += " (denied)"
		case e.Error != nil && *e.Error:
			t += " (error)"
		}
		return []Line{f.line(e.Parent, t)}
	case *events.Text:
		if e.Parent == nil {
			t := e.Text
			f.lastMainText = &t
		}
		return TextLines(f.Label(e.Parent), e.Text, PreviewLines)
	case *events.Usage:
		if m := str(e.Model); m != "" {
			if e.Parent == nil {
				f.mainModel = m
			} else if a := f.agents[*e.Parent]; a != nil {
				a.usageModel = m
			}
		}
	case *events.SubagentStart:
		label := SubagentLabel(e.Kind, e.Number)
		f.agents[e.ID] = &agent{label: label, startModel: str(e.Model)}
		t := "agent start " + label
		if m := str(e.Model); m != "" {
			t += " (" + m + ")"
		}
		return []Line{f.line(e.Parent, t+": "+e.Description)}
	case *events.SubagentEnd:
		id := e.ID
		t := "agent " + e.Status + " " + FormatSeconds(e.DurationMs)
		if m := f.Model(&id); m != "" {
			t += " " + m
		}
		if u := FormatUsage(e.Usage.TokenCounts); u != "" {
			t += "  " + u
		}
		return []Line{f.line(&id, t)}
	case *events.NetworkAccess:
		if e.Allowed {
			return nil
		}
		t := "net denied " + net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
		if r := str(e.Reason); r != "" {
			t += " (" + r + ")"
		}
		if e.Suppressed > 1 {
			t += " and " + strconv.Itoa(e.Suppressed-1) + " more"
		}
		return []Line{{Label: MainLabel, Agent: true, Text: t}}
	case *events.End:
		var out []Line
		if ShowResult(e.Result, f.lastMainText) {
			out = ResultLines(*e.Result)
		}
		if e.Git != nil {
			out = append(out, GitLine(e.Git))
		}
		return append(out, EndLine(e))
	}
	return nil
}

func (f *Formatter) line(parent *string, text string) Line {
	return Line{Label: f.Label(parent), Agent: true, Text: text}
}

// PromptChars bounds the prompt line: the first line of a long prompt
// (one of a megabyte from a file, all on one line) is cut there with "…".
const PromptChars = 200

func (f *Formatter) prompt(e *events.Prompt) Line {
	t := "prompt"
	for _, l := range splitLines(e.Text) {
		if !isBlank(l) {
			t += " " + cutChars(strings.TrimRightFunc(l, unicode.IsSpace), PromptChars)
			break
		}
	}
	switch n := len(e.Images); {
	case n == 1:
		t += " (+1 image)"
	case n > 1:
		t += " (+" + strconv.Itoa(n) + " images)"
	}
	return Line{Label: MainLabel, Agent: true, Text: t}
}

// EndLine is the [end] line: status, seconds, then, two spaces apart, the
// usage, the cost, "session ID" and the detail on one line; for rejected
// only the status and the detail.
func EndLine(e *events.End) Line {
	detail := OneLine(e.Detail)
	if e.Status == events.StatusRejected {
		return Line{Label: "end", Text: JoinWords(e.Status, detail)}
	}
	var cost, session string
	if e.Usage.CostUSD != nil {
		cost = FormatCost(*e.Usage.CostUSD)
	}
	if e.SessionID != nil {
		session = "session " + *e.SessionID
	}
	return Line{Label: "end", Text: JoinItems(e.Status+" "+FormatSeconds(e.DurationMs),
		FormatUsage(e.Usage.TokenCounts), cost, session, detail)}
}

// GitLine is the [git] line before [end] of a run with --repo: the diff
// stat, then where the change went (the branch and its head, the patch,
// or why it was not published).
func GitLine(g *events.Git) Line {
	stat := "no change"
	if g.HeadCommit != g.BaseCommit {
		stat = fmt.Sprintf("%d %s changed, +%d -%d, %d %s", g.FilesChanged, noun(g.FilesChanged, "file", "files"),
			g.Insertions, g.Deletions, g.Commits, noun(g.Commits, "commit", "commits"))
	}
	var where string
	switch {
	case g.Pushed && g.Branch != nil:
		where = "pushed " + OneLine(*g.Branch) + " (" + shortID(g.HeadCommit) + ")"
	case g.Patch != nil:
		where = "patch " + OneLine(*g.Patch)
	}
	return Line{Label: "git", Text: JoinItems(stat, where, OneLine(g.Detail))}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func noun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// JoinWords joins the non-empty words with one space.
func JoinWords(words ...string) string {
	var b strings.Builder
	for _, w := range words {
		if w == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// cutChars is s cut to at most n characters, the cut marked with "…".
func cutChars(s string, n int) string {
	i := 0
	for at := range s {
		if i == n {
			return strings.TrimRightFunc(s[:at], unicode.IsSpace) + "…"
		}
		i++
	}
	return s
}
