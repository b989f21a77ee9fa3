package controllers

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// Budget bounds (the API's MaxItems, and why).
const (
	// maxBudgetRuns bounds status.runs: the largest spenders say where the
	// spend went; runCount counts them all.
	maxBudgetRuns = 100
	// maxDeletedGroups bounds status.deleted: a day in hourly groups and
	// some room.
	maxDeletedGroups = 50
	// maxUnpricedModels bounds spent.unpricedModels.
	maxUnpricedModels = 10
)

// window is a budget's current window.
type window struct {
	start time.Time
	// end is a calendar window's end; zero for a rolling one.
	end time.Time
	// length is a rolling window's length.
	length time.Duration
	// bucket groups deleted runs by the time of their end.
	bucket time.Duration
	// says is the window in words, for messages.
	says string
}

// budgetWindow is the window of w that holds now.
func budgetWindow(w v1alpha1.BudgetWindow, now time.Time) (window, error) {
	if w.Rolling != "" {
		d, err := time.ParseDuration(w.Rolling)
		if err != nil || d < time.Minute {
			return window{}, fmt.Errorf("window.rolling %q is not a duration of 1m or more", w.Rolling)
		}
		bucket := min(max((d/24).Truncate(time.Minute), time.Minute), time.Hour)
		return window{start: now.Add(-d), length: d, bucket: bucket, says: "in the last " + w.Rolling}, nil
	}
	tz := w.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return window{}, fmt.Errorf("window.timeZone %q is not a time zone the manager knows (an IANA name such as Europe/Berlin)", w.TimeZone)
	}
	t := now.In(loc)
	y, m, d := t.Date()
	var start, end time.Time
	switch w.Calendar {
	case v1alpha1.CalendarDay:
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		end = start.AddDate(0, 0, 1)
	case v1alpha1.CalendarWeek:
		start = time.Date(y, m, d-(int(t.Weekday())+6)%7, 0, 0, 0, 0, loc)
		end = start.AddDate(0, 0, 7)
	case v1alpha1.CalendarMonth:
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		end = start.AddDate(0, 1, 0)
	default:
		return window{}, fmt.Errorf("window: set rolling or calendar (Day, Week or Month), not %q", w.Calendar)
	}
	return window{start: start, end: end, bucket: time.Hour, says: "in the window since " + start.UTC().Format(time.RFC3339)}, nil
}

// runSpend is what one run spent, as budgets count it.
type runSpend struct {
	tokens         int64
	nanoUSD        int64 // cost in billionths of a dollar: sums stay exact
	estimated      bool
	unpriced       int64
	unpricedModels []string
}

// spendOf is a run's spend: tokens are the larger of its reported total and
// the proxy's meter; the cost is the runtime's own or the price table's
// estimate (costEstimated), and the tokens of models with neither are
// unpriced.
func spendOf(st v1alpha1.AgentRunStatus) runSpend {
	var s runSpend
	u := st.Usage
	if u != nil {
		s.tokens = u.TokenCounts.Tokens()
		switch {
		case u.CostUSD != "":
			s.nanoUSD, s.estimated = nanoUSD(u.CostUSD), u.CostEstimated
		default:
			var inModels int64
			models := make([]string, 0, len(u.ByModel))
			for m := range u.ByModel {
				models = append(models, m)
			}
			sort.Strings(models)
			for _, m := range models {
				c := u.ByModel[m]
				n := c.Tokens()
				inModels += n
				if c.CostUSD != "" {
					s.nanoUSD += nanoUSD(c.CostUSD)
					s.estimated = s.estimated || c.CostEstimated
				} else if n > 0 {
					s.unpriced += n
					s.unpricedModels = append(s.unpricedModels, m)
				}
			}
			if rest := s.tokens - inModels; rest > 0 {
				s.unpriced += rest
				s.unpricedModels = append(s.unpricedModels, "unknown")
			}
		}
	}
	if p := st.Progress; p != nil && p.MeteredTokens != nil && *p.MeteredTokens > s.tokens {
		s.tokens = *p.MeteredTokens
	}
	return s
}

func (s *runSpend) add(o runSpend) {
	s.tokens += o.tokens
	s.nanoUSD += o.nanoUSD
	s.estimated = s.estimated || o.estimated
	s.unpriced += o.unpriced
	for _, m := range o.unpricedModels {
		if len(s.unpricedModels) < maxUnpricedModels && !containsString(s.unpricedModels, m) {
			s.unpricedModels = append(s.unpricedModels, m)
		}
	}
}

func (s runSpend) status() v1alpha1.BudgetSpend {
	b := v1alpha1.BudgetSpend{Tokens: s.tokens, CostEstimated: s.estimated, UnpricedTokens: s.unpriced}
	if s.nanoUSD > 0 || s.estimated {
		b.CostUSD = formatNanoUSD(s.nanoUSD)
	}
	if len(s.unpricedModels) > 0 {
		b.UnpricedModels = append([]string{}, s.unpricedModels...)
		sort.Strings(b.UnpricedModels)
	}
	return b
}

func spendFromStatus(b v1alpha1.BudgetSpend) runSpend {
	return runSpend{tokens: b.Tokens, nanoUSD: nanoUSD(b.CostUSD), estimated: b.CostEstimated,
		unpriced: b.UnpricedTokens, unpricedModels: append([]string{}, b.UnpricedModels...)}
}

// nanoUSD reads a decimal dollar string in billionths of a dollar.
func nanoUSD(s string) int64 {
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > 9e9 {
		return 0
	}
	return int64(math.Round(f * 1e9))
}

func formatNanoUSD(n int64) string {
	s := strconv.FormatInt(n/1e9, 10)
	if frac := n % 1e9; frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
	}
	return s
}

// deletedRun is a run deleted while the manager ran: its last spend, kept
// in the budgets that covered it.
type deletedRun struct {
	uid   types.UID
	spend runSpend
	// until is its end, or its deletion if it had not ended.
	until time.Time
}

// counts reports whether a run's spend counts in window w: it started, and
// it had not ended before the window began (a run counts with its whole
// total in every window it ran in).
func counts(st v1alpha1.AgentRunStatus, w window) bool {
	if st.StartTime == nil && st.Usage == nil {
		return false
	}
	return st.CompletionTime == nil || !st.CompletionTime.Time.Before(w.start)
}

// budgetView is all that computeBudgetStatus reads of a run (besides its
// name and uid, which never change): the labels it is selected by, what it
// spent, when it ran and its phase. nil: the run counts in no window
// (counts), so nothing else of it matters. (Exported fields: the
// semantic comparison reads them.)
type budgetView struct {
	Labels            map[string]string
	Start, Completion *metav1.Time
	Usage             *v1alpha1.Usage
	Metered           *int64
	Phase             v1alpha1.Phase
}

func budgetViewOf(run *v1alpha1.AgentRun) *budgetView {
	st := run.Status
	if st.StartTime == nil && st.Usage == nil {
		return nil
	}
	v := &budgetView{Labels: run.BudgetLabels(), Start: st.StartTime, Completion: st.CompletionTime, Usage: st.Usage, Phase: st.Phase}
	if st.Progress != nil {
		v.Metered = st.Progress.MeteredTokens
	}
	return v
}

// budgetViewChanged reports whether a run's change can change the status
// of a budget covering it (before or after). A pure function.
func budgetViewChanged(old, run *v1alpha1.AgentRun) bool {
	a, b := budgetViewOf(old), budgetViewOf(run)
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return !equality.Semantic.DeepEqual(*a, *b)
}

// budgetResult is a computed budget status and when to look again.
type budgetResult struct {
	status v1alpha1.AgentBudgetStatus
	// recheck is when the spend next changes by time alone (a calendar
	// window ends, a run leaves a rolling window); 0: never.
	recheck time.Duration
}

// computeBudgetStatus is a budget's status from the runs of its namespace,
// the deleted runs not yet in its status, and the time. It is a pure
// function.
func computeBudgetStatus(b *v1alpha1.AgentBudget, runs []v1alpha1.AgentRun, deleted []deletedRun, now time.Time) budgetResult {
	old := b.Status
	st := v1alpha1.AgentBudgetStatus{ObservedGeneration: b.Generation, Conditions: append([]metav1.Condition{}, old.Conditions...)}
	cond := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionExhausted, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	w, err := budgetWindow(b.Spec.Window, now)
	reason := v1alpha1.ReasonInvalidWindow
	if err == nil && b.Spec.Selector != nil {
		if _, err = b.Spec.Selector.Parse(); err != nil {
			reason, err = v1alpha1.ReasonInvalidSelector, fmt.Errorf("spec.selector does not parse, so the budget holds every AgentRun of the namespace until it is fixed: %w", err)
		}
	}
	if err != nil {
		// Fail closed: a budget that cannot be read holds what it covers
		// (for a selector, every run of the namespace: Covers).
		st.Spent, st.RunCount, st.Runs, st.Deleted = old.Spent, old.RunCount, old.Runs, old.Deleted
		cond(metav1.ConditionTrue, reason, err.Error())
		return budgetResult{status: st}
	}
	if !w.end.IsZero() {
		// A rolling window's start moves on by itself; written, it would
		// make a write of an idle budget's status every interval.
		st.WindowStart, st.WindowEnd = &metav1.Time{Time: w.start}, &metav1.Time{Time: w.end}
	}
	var total runSpend
	var next time.Time
	later := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !w.end.IsZero() {
		later(w.end)
	}

	// Deleted runs: the groups still in the window, and the new ones.
	groups := map[int64]*v1alpha1.DeletedSpend{}
	addGroup := func(until time.Time, n int32, s runSpend) {
		k := until.UnixNano() / int64(w.bucket)
		g := groups[k]
		if g == nil {
			g = &v1alpha1.DeletedSpend{Until: metav1.Time{Time: until}}
			groups[k] = g
		}
		merged := spendFromStatus(g.Spent)
		merged.add(s)
		g.Spent, g.Runs = merged.status(), g.Runs+n
		if until.After(g.Until.Time) {
			g.Until = metav1.Time{Time: until}
		}
	}
	for _, g := range old.Deleted {
		if !g.Until.Time.Before(w.start) {
			addGroup(g.Until.Time, g.Runs, spendFromStatus(g.Spent))
		}
	}
	for _, d := range deleted {
		if !d.until.Before(w.start) && (d.spend.tokens > 0 || d.spend.nanoUSD > 0) {
			addGroup(d.until, 1, d.spend)
		}
	}
	keys := make([]int64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		st.Deleted = append(st.Deleted, *groups[k])
	}
	for len(st.Deleted) > maxDeletedGroups {
		// The two oldest become one, counted until the later of them
		// leaves the window: never less than was spent.
		a, c := st.Deleted[0], st.Deleted[1]
		merged := spendFromStatus(a.Spent)
		merged.add(spendFromStatus(c.Spent))
		st.Deleted = append([]v1alpha1.DeletedSpend{{Until: c.Until, Runs: a.Runs + c.Runs, Spent: merged.status()}}, st.Deleted[2:]...)
	}
	for _, g := range st.Deleted {
		total.add(spendFromStatus(g.Spent))
		st.RunCount += g.Runs
		if w.length > 0 {
			later(g.Until.Add(w.length))
		}
	}

	// The runs that exist.
	for i := range runs {
		run := &runs[i]
		if !b.Covers(run) || !counts(run.Status, w) {
			continue
		}
		s := spendOf(run.Status)
		total.add(s)
		st.RunCount++
		st.Runs = append(st.Runs, v1alpha1.BudgetRun{Name: run.Name, UID: run.UID, Tokens: s.tokens,
			CostUSD: s.status().CostUSD, CostEstimated: s.estimated, Phase: run.Status.Phase})
		if ct := run.Status.CompletionTime; ct != nil && w.length > 0 {
			later(ct.Add(w.length))
		}
	}
	sort.Slice(st.Runs, func(i, j int) bool {
		a, c := st.Runs[i], st.Runs[j]
		if a.Tokens != c.Tokens {
			return a.Tokens > c.Tokens
		}
		if na, nc := nanoUSD(a.CostUSD), nanoUSD(c.CostUSD); na != nc {
			return na > nc
		}
		return a.Name < c.Name
	})
	if len(st.Runs) > maxBudgetRuns {
		st.Runs = st.Runs[:maxBudgetRuns]
	}
	st.Spent = total.status()

	reason, msg := budgetVerdict(b.Spec, total, w)
	status := metav1.ConditionTrue
	if reason == v1alpha1.ReasonWithinBudget {
		status = metav1.ConditionFalse
	}
	cond(status, reason, msg)
	var recheck time.Duration
	if !next.IsZero() {
		recheck = next.Sub(now)
	}
	return budgetResult{status: st, recheck: recheck}
}

// budgetVerdict says whether the spend reached a cap, and what it is.
func budgetVerdict(spec v1alpha1.AgentBudgetSpec, s runSpend, w window) (string, string) {
	var parts []string
	reason := v1alpha1.ReasonWithinBudget
	if spec.MaxTokens != nil {
		parts = append(parts, fmt.Sprintf("%d of %d tokens", s.tokens, *spec.MaxTokens))
		if s.tokens >= *spec.MaxTokens {
			reason = v1alpha1.ReasonTokensSpent
		}
	}
	if spec.MaxCostUSD != "" {
		c := "$" + formatNanoUSD(s.nanoUSD) + " of $" + spec.MaxCostUSD
		if s.estimated {
			c += " (estimated in part from the price table)"
		}
		parts = append(parts, c)
		if max := nanoUSD(spec.MaxCostUSD); s.nanoUSD >= max && reason == v1alpha1.ReasonWithinBudget {
			reason = v1alpha1.ReasonCostSpent
		}
	}
	msg := "spent " + strings.Join(parts, " and ") + " " + w.says
	if spec.MaxCostUSD != "" && s.unpriced > 0 {
		msg += fmt.Sprintf("; %d tokens of %s have no cost or price, so the cost cap does not see them", s.unpriced, strings.Join(s.unpricedModels, ", "))
		if spec.MaxTokens != nil {
			msg += " (maxTokens bounds them)"
		} else {
			msg += " (set their prices in the chart's prices, or a maxTokens)"
		}
	}
	return reason, msg
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
