package ui

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/kubectlplugin/usagesum"
)

// The pages get view models, made here and sent as JSON: every string is
// ready to show (inert: see inert), and the page's script places each one
// as text. The numbers beside them are for sorting and live durations.

// row is one run in the runs list.
type row struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Runtime   string `json:"runtime"`
	Model     string `json:"model"`
	// Phase is the run's phase, "" before the controller has seen it.
	Phase     string `json:"phase"`
	EndStatus string `json:"endStatus"`
	// Reason is the Succeeded condition's reason (Cancelled, OOMKilled,
	// BudgetExhausted, ...), when it says more than the phase.
	Reason string `json:"reason"`
	// Created, Started and Ended are Unix milliseconds (0: not yet).
	Created int64 `json:"created"`
	Started int64 `json:"started"`
	Ended   int64 `json:"ended"`
	// DurationMs is the run's duration once it ended; while it runs the
	// page counts from Started.
	DurationMs int64   `json:"durationMs"`
	Running    bool    `json:"running"`
	Tokens     int64   `json:"tokens"`
	TokensText string  `json:"tokensText"`
	Cost       string  `json:"cost"`
	CostValue  float64 `json:"costValue"`
	// CostEstimated: the manager's estimate from its price table.
	CostEstimated bool `json:"costEstimated"`
	// Branch and Diff are from status.git (git workspaces), "" without.
	Branch   string `json:"branch"`
	Diff     string `json:"diff"`
	DiffSize int64  `json:"diffSize"`
	// Activity is what the agent does now (while it runs), Result the
	// first line of its result (or of why it did not finish).
	Activity string `json:"activity"`
	Result   string `json:"result"`
	Stopping bool   `json:"stopping"`
}

// resultWidth is how much of the result's first line a row shows,
// modelWidth how much of the model's name.
const (
	resultWidth = 100
	modelWidth  = 48
)

// newRow is the row of a run.
func newRow(info *runInfo) row {
	run := &info.Run
	st := run.Status
	r := row{
		UID: string(run.UID), Namespace: run.Namespace, Name: run.Name,
		Runtime: inert(string(run.Spec.Runtime)), Model: oneLine(modelOf(run), modelWidth),
		Phase: string(st.Phase), EndStatus: st.EndStatus, Reason: inert(reasonWord(run)),
		Created: millis(run.CreationTimestamp.Time), Running: !ended(run), Stopping: stopRequested(run),
	}
	if st.StartTime != nil {
		r.Started = millis(st.StartTime.Time)
	}
	if st.CompletionTime != nil {
		r.Ended = millis(st.CompletionTime.Time)
	}
	switch {
	case st.DurationMs != nil:
		r.DurationMs = *st.DurationMs
	case st.StartTime != nil && st.CompletionTime != nil:
		r.DurationMs = st.CompletionTime.Sub(st.StartTime.Time).Milliseconds()
	}
	if u := st.Usage; u != nil {
		if n, ok := u.Tokens(); ok {
			r.Tokens, r.TokensText = n, text.FormatTokens(n)
		}
		if c, ok := usagesum.ParseCost(u.CostUSD); ok {
			r.Cost, r.CostValue = formatCost(c), ratFloat(c)
			r.CostEstimated = u.CostEstimated
		}
	}
	if g := info.Git; g != nil {
		r.Branch = inert(g.Branch)
		r.Diff, r.DiffSize = diffStat(g)
	}
	if st.Progress != nil && r.Running {
		r.Activity = oneLine(st.Progress.Activity, resultWidth)
	}
	if st.Result != nil {
		r.Result = oneLine(*st.Result, resultWidth)
	}
	if r.Result == "" && !r.Running {
		r.Result = oneLine(st.Detail, resultWidth)
	}
	return r
}

// diffStat is a change's size as git prints it short ("3 files +40 −12"),
// and the number of lines changed, for sorting.
func diffStat(g *gitStatus) (string, int64) {
	if g.FilesChanged == nil && g.Insertions == nil && g.Deletions == nil {
		return "", 0
	}
	var parts []string
	var size int64
	if g.FilesChanged != nil {
		parts = append(parts, plural(*g.FilesChanged, "file", "files"))
	}
	if g.Insertions != nil {
		parts = append(parts, fmt.Sprintf("+%d", *g.Insertions))
		size += *g.Insertions
	}
	if g.Deletions != nil {
		parts = append(parts, fmt.Sprintf("−%d", *g.Deletions))
		size += *g.Deletions
	}
	return strings.Join(parts, " "), size
}

// modelOf is the model a run asked for, else the one its usage names
// most tokens for, else "default" (the runtime's own).
func modelOf(run *v1alpha1.AgentRun) string {
	if run.Spec.Model != "" {
		return run.Spec.Model
	}
	if u := run.Status.Usage; u != nil && len(u.ByModel) > 0 {
		var best string
		var most int64 = -1
		for m, c := range u.ByModel {
			if n := c.Tokens(); n > most || (n == most && m < best) {
				best, most = m, n
			}
		}
		if len(u.ByModel) > 1 {
			return fmt.Sprintf("%s +%d", best, len(u.ByModel)-1)
		}
		return best
	}
	return "default"
}

// reasonWord is the Succeeded condition's reason when it adds to the
// phase: Cancelled or Timeout beside Failed, BudgetExhausted beside
// Queued; "" for Running beside Running.
func reasonWord(run *v1alpha1.AgentRun) string {
	r := succeededReason(run)
	if r == string(run.Status.Phase) || r == "Finished" {
		return ""
	}
	return r
}

func succeededReason(run *v1alpha1.AgentRun) string {
	for _, c := range run.Status.Conditions {
		if c.Type == v1alpha1.ConditionSucceeded {
			return c.Reason
		}
	}
	return ""
}

// ended reports whether the run has ended: status never leaves Succeeded
// or Failed.
func ended(run *v1alpha1.AgentRun) bool {
	return run.Status.Phase == v1alpha1.PhaseSucceeded || run.Status.Phase == v1alpha1.PhaseFailed
}

// formatCost shows dollars with four decimals, as kubectl agentrun get
// does ($0.0437).
func formatCost(r *big.Rat) string { return "$" + r.FloatString(4) }

func ratFloat(r *big.Rat) float64 { f, _ := r.Float64(); return f }

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// inert is a string the agent may have written, made safe to show as
// text: the terminal's control characters and escape sequences' ESC gone
// (text.Printable, as the terminal formats do), and the Unicode controls
// that reorder or hide text (bidirectional overrides and isolates, zero
// width joiners around them) too, so that what the page shows reads as
// the bytes say. HTML needs no escaping here: the page's script only ever
// sets text, never markup.
func inert(s string) string {
	s = text.Printable(s)
	if !strings.ContainsFunc(s, isHiddenControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isHiddenControl(r) {
			return -1
		}
		return r
	}, s)
}

func isHiddenControl(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return unicode.Is(unicode.Cf, r) && r != 0x200d && r != 0xad // keep emoji joiners and soft hyphens
}

// oneLine is the first non-blank line of s, inert, cut to max runes.
func oneLine(s string, max int) string {
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
	}, inert(line)))
	if r := []rune(line); len(r) > max {
		line = strings.TrimRight(string(r[:max-1]), " ") + "…"
	}
	return line
}

// filter is what the runs list shows: the query of its URL.
type filter struct {
	Namespace string // "" for every namespace the ui watches
	Phase     string // a phase, "none" for runs without one, "" for all
	Runtime   string
	Selector  labels.Selector // nil for all
}

// parseFilter reads the list's query parameters ns, phase, runtime and
// l (a label selector, as kubectl -l takes it).
func parseFilter(get func(string) string) (filter, error) {
	f := filter{Namespace: get("ns"), Phase: get("phase"), Runtime: get("runtime")}
	if s := strings.TrimSpace(get("l")); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return f, fmt.Errorf("the label selector %q: %v", s, err)
		}
		f.Selector = sel
	}
	return f, nil
}

// match reports whether the filter keeps run.
func (f filter) match(run *v1alpha1.AgentRun) bool {
	switch {
	case f.Namespace != "" && run.Namespace != f.Namespace:
		return false
	case f.Phase == "none" && run.Status.Phase != "":
		return false
	case f.Phase != "" && f.Phase != "none" && string(run.Status.Phase) != f.Phase:
		return false
	case f.Runtime != "" && string(run.Spec.Runtime) != f.Runtime:
		return false
	case f.Selector != nil && !f.Selector.Matches(labels.Set(run.Labels)):
		return false
	}
	return true
}

// sortRows puts the newest run first (the list's order before the user
// sorts it), then by namespace and name.
func sortRows(rows []row) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Created != b.Created {
			return a.Created > b.Created
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
