package kubectlplugin

import (
	"fmt"
	"io"
	"math/big"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/kubectlplugin/usagesum"
)

// none is a cell without a value.
const none = "-"

// writeTable writes rows under a header, columns aligned as kubectl aligns
// them (its printers' tabwriter settings). Cells hold what the agent wrote
// (its result's first line, the detail of its error), so each is made one
// printable line: no escape sequence reaches the terminal, and no tab or
// newline breaks the table.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(text.Printable(c))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// parseCost reads a costUSD exactly.
func parseCost(s string) (*big.Rat, bool) { return usagesum.ParseCost(s) }

// formatCost shows dollars with four decimals, as the text format's end
// line does ($0.0437), rounded to the nearest, halves away from zero.
func formatCost(r *big.Rat) string {
	if r == nil {
		return none
	}
	return "$" + r.FloatString(4)
}

// costCell is the COST of one run: its costUSD, or "-" when the runtime
// reported none (codex) or the value does not parse.
func costCell(u *v1alpha1.Usage) string {
	if u == nil {
		return none
	}
	r, ok := parseCost(u.CostUSD)
	if !ok {
		return none
	}
	return formatCost(r)
}

// formatDuration shows a run's duration: seconds with a tenth below a
// minute (text's stopwatch, 12.4s), then minutes and seconds (4m05s), then
// hours and minutes (2h03m).
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return text.FormatSeconds(d.Milliseconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	default:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}

// firstLine is the first non-blank line of s, trimmed, with tabs and other
// control characters made spaces (a tab would break the table's columns),
// cut to max runes with "…".
func firstLine(s string, max int) string {
	var line string
	for l := range strings.Lines(s) {
		if strings.TrimSpace(l) != "" {
			line = l
			break
		}
	}
	line = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, line))
	if r := []rune(line); len(r) > max {
		line = strings.TrimRight(string(r[:max-1]), " ") + "…"
	}
	return line
}

// ended reports whether the run has ended (phase Succeeded or Failed);
// status never leaves those phases.
func ended(run *v1alpha1.AgentRun) bool {
	return run.Status.Phase == v1alpha1.PhaseSucceeded || run.Status.Phase == v1alpha1.PhaseFailed
}

// succeededReason is the reason of the Succeeded condition: the phase
// while the run is in progress, then Finished or why it failed (Timeout,
// Cancelled, OOMKilled, ...).
func succeededReason(run *v1alpha1.AgentRun) string {
	for _, c := range run.Status.Conditions {
		if c.Type == v1alpha1.ConditionSucceeded {
			return c.Reason
		}
	}
	return ""
}

// phase is the run's phase, or says that there is none yet: without a
// controller (the operator not installed, say) there never will be.
func phase(run *v1alpha1.AgentRun) string {
	if run.Status.Phase == "" {
		return "not yet seen by the controller"
	}
	return string(run.Status.Phase)
}

// outcome is one line about how a run stands: "Failed (Timeout): DETAIL".
func outcome(run *v1alpha1.AgentRun) string {
	s := phase(run)
	if r := succeededReason(run); r != "" && r != s {
		s += " (" + r + ")"
	}
	if run.Status.Detail != "" {
		// The detail may be the agent's own error text: shown, not acted on.
		s += ": " + text.Printable(text.OneLine(run.Status.Detail))
	}
	return s
}

// orNone is s, or "-" when it is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}
