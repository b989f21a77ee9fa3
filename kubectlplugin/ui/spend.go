package ui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/kubectlplugin/usagesum"
)

// spendView is the spend page of one namespace: cost and tokens over
// time, by runtime and by model, from the runs still kept, and the
// AgentBudgets that cover its runs.
type spendView struct {
	Namespace  string   `json:"namespace"`
	Namespaces []string `json:"namespaces"`
	// Note says what the charts count.
	Note string `json:"note"`
	// Bucket is the length of one bar: hour, day or week; Labels name
	// the bars, oldest first.
	Bucket    string       `json:"bucket"`
	Labels    []string     `json:"labels"`
	ByRuntime []series     `json:"byRuntime"`
	ByModel   []series     `json:"byModel"`
	Runtimes  []usageTotal `json:"runtimes"`
	Models    []usageTotal `json:"models"`
	Budgets   []budgetLine `json:"budgets"`
	Problem   string       `json:"problem"`
}

// series is one runtime's or model's spend per bar.
type series struct {
	Name   string    `json:"name"`
	Tokens []int64   `json:"tokens"`
	Cost   []float64 `json:"cost"`
}

// usageTotal is one runtime's or model's total, the charts as a table.
type usageTotal struct {
	Name   string `json:"name"`
	Runs   int    `json:"runs"`
	Tokens string `json:"tokens"`
	Cost   string `json:"cost"`
}

// budgetLine is one AgentBudget: its caps, what its window spent, the
// runs it holds.
type budgetLine struct {
	Name     string   `json:"name"`
	Window   string   `json:"window"`
	Covers   string   `json:"covers"`
	State    string   `json:"state"`
	Spent    bool     `json:"spent"`
	Tokens   string   `json:"tokens"`
	Cost     string   `json:"cost"`
	MaxTok   string   `json:"maxTokens"`
	MaxCost  string   `json:"maxCost"`
	TokShare float64  `json:"tokenShare"` // of the cap, 1 = all; -1 without a cap
	CostShr  float64  `json:"costShare"`
	RunCount int32    `json:"runCount"`
	Held     []string `json:"held"`
	Notes    []string `json:"notes"`
}

// spendPage makes the spend view of namespace ns from the runs and
// budgets the ui keeps.
func spendPage(ns string, namespaces []string, runs []*runInfo, budgets []*v1alpha1.AgentBudget, now time.Time, loc *time.Location) spendView {
	v := spendView{Namespace: ns, Namespaces: namespaces}
	var kept []v1alpha1.AgentRun
	var oldest time.Time
	for _, r := range runs {
		if r.Run.Namespace != ns {
			continue
		}
		kept = append(kept, r.Run)
		if t := spendTime(&r.Run); oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	switch len(kept) {
	case 0:
		v.Note = "No AgentRuns are kept in " + ns + ": the charts count the runs still kept, and there are none."
	default:
		v.Note = fmt.Sprintf("From the %s still kept in %s, the oldest from %s. A deleted AgentRun is not in the charts (the budgets below still count it while its window lasts).",
			plural(int64(len(kept)), "AgentRun", "AgentRuns"), ns, oldest.In(loc).Format("2 Jan 2006 15:04"))
	}
	if len(kept) > 0 {
		starts, labels, bucket := buckets(oldest, now, loc)
		v.Bucket, v.Labels = bucket, labels
		byBucket := make([][]v1alpha1.AgentRun, len(starts))
		for _, run := range kept {
			t := spendTime(&run)
			i := sort.Search(len(starts), func(i int) bool { return starts[i].After(t) }) - 1
			if i < 0 {
				i = 0
			}
			byBucket[i] = append(byBucket[i], run)
		}
		v.ByRuntime, v.Runtimes = spendSeries(kept, byBucket, usagesum.ByRuntime)
		v.ByModel, v.Models = spendSeries(kept, byBucket, usagesum.ByModel)
	}
	infos := make([]*runInfo, 0, len(runs))
	for _, r := range runs {
		if r.Run.Namespace == ns {
			infos = append(infos, r)
		}
	}
	for _, b := range budgets {
		if b.Namespace == ns {
			v.Budgets = append(v.Budgets, newBudgetLine(b, infos, now))
		}
	}
	sort.Slice(v.Budgets, func(i, j int) bool { return v.Budgets[i].Name < v.Budgets[j].Name })
	return v
}

// spendTime is when a run's spend counts: its end, else its start, else
// its creation.
func spendTime(run *v1alpha1.AgentRun) time.Time {
	switch st := run.Status; {
	case st.CompletionTime != nil:
		return st.CompletionTime.Time
	case st.StartTime != nil:
		return st.StartTime.Time
	}
	return run.CreationTimestamp.Time
}

// buckets divides oldest..now into bars: hours for two days or less,
// days for up to 62, weeks beyond; it returns each bar's start and label.
func buckets(oldest, now time.Time, loc *time.Location) (starts []time.Time, names []string, unit string) {
	oldest, now = oldest.In(loc), now.In(loc)
	if now.Before(oldest) {
		now = oldest
	}
	span := now.Sub(oldest)
	var start time.Time
	var step func(time.Time) time.Time
	var format string
	switch {
	case span <= 48*time.Hour:
		unit, format = "hour", "Jan 2 15:00"
		start = time.Date(oldest.Year(), oldest.Month(), oldest.Day(), oldest.Hour(), 0, 0, 0, loc)
		step = func(t time.Time) time.Time { return t.Add(time.Hour) }
	case span <= 62*24*time.Hour:
		unit, format = "day", "Mon Jan 2"
		start = time.Date(oldest.Year(), oldest.Month(), oldest.Day(), 0, 0, 0, 0, loc)
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }
	default:
		unit, format = "week", "week of Jan 2 2006"
		d := time.Date(oldest.Year(), oldest.Month(), oldest.Day(), 0, 0, 0, 0, loc)
		start = d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7)) // Monday
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 7) }
	}
	for t := start; !t.After(now); t = step(t) {
		starts = append(starts, t)
		names = append(names, t.Format(format))
	}
	return starts, names, unit
}

// spendSeries is one series per runtime or model, from usagesum's sums
// of each bar's runs (so the bars add up as `kubectl agentrun usage`
// does), and the totals over all bars.
func spendSeries(all []v1alpha1.AgentRun, byBucket [][]v1alpha1.AgentRun, by string) ([]series, []usageTotal) {
	total := usagesum.Sum(all, by)
	index := map[string]int{}
	out := make([]series, 0, len(total.Rows))
	var totals []usageTotal
	for i, r := range total.Rows {
		index[r.Key] = i
		out = append(out, series{Name: inert(r.Key), Tokens: make([]int64, len(byBucket)), Cost: make([]float64, len(byBucket))})
		cost := "-"
		if r.Cost != nil {
			cost = formatCost(r.Cost)
		}
		totals = append(totals, usageTotal{Name: inert(r.Key), Runs: r.Runs, Tokens: text.FormatTokens(r.Total()), Cost: cost})
	}
	for b, runs := range byBucket {
		for _, r := range usagesum.Sum(runs, by).Rows {
			i := index[r.Key]
			out[i].Tokens[b] = r.Total()
			if r.Cost != nil {
				out[i].Cost[b] = ratFloat(r.Cost)
			}
		}
	}
	return out, totals
}

// newBudgetLine is a budget as the pages show it; runs are its
// namespace's, for the runs it holds.
func newBudgetLine(b *v1alpha1.AgentBudget, runs []*runInfo, now time.Time) budgetLine {
	st := b.Status
	l := budgetLine{Name: inert(b.Name), Window: windowWords(b, now), Covers: coversWords(b), RunCount: st.RunCount,
		Tokens: text.FormatTokens(st.Spent.Tokens), TokShare: -1, CostShr: -1}
	if b.Spec.MaxTokens != nil {
		l.MaxTok = text.FormatTokens(*b.Spec.MaxTokens)
		l.TokShare = float64(st.Spent.Tokens) / float64(*b.Spec.MaxTokens)
	}
	spent, _ := usagesum.ParseCost(orDefault(st.Spent.CostUSD, "0"))
	l.Cost = formatCost(spent)
	if max, ok := usagesum.ParseCost(b.Spec.MaxCostUSD); ok {
		l.MaxCost = formatCost(max)
		if max.Sign() > 0 {
			l.CostShr = ratFloat(spent) / ratFloat(max)
		}
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionExhausted)
	switch {
	case c == nil:
		l.State = "Not yet counted by the manager."
	case c.Status == metav1.ConditionTrue && st.WindowEnd != nil && !now.Before(st.WindowEnd.Time):
		l.State = "Its window has ended; the manager starts the next one."
	case c.Status == metav1.ConditionTrue:
		l.Spent = true
		l.State = inert("Spent (" + c.Reason + "): " + c.Message + ". New runs it covers wait, Queued; running ones are stopped.")
	default:
		l.State = "Within budget."
	}
	if st.Spent.CostEstimated {
		l.Notes = append(l.Notes, "Part of the cost is the manager's estimate from its price table.")
	}
	if st.Spent.UnpricedTokens > 0 {
		l.Notes = append(l.Notes, inert(fmt.Sprintf("%s of models without a price (%s) are not in the cost: only the token cap bounds them.",
			text.FormatTokens(st.Spent.UnpricedTokens), strings.Join(st.Spent.UnpricedModels, ", "))))
	}
	for _, r := range runs {
		if v1alpha1.HoldingBudget(&r.Run) == b.Name {
			l.Held = append(l.Held, r.Run.Name)
		}
	}
	sort.Strings(l.Held)
	return l
}

// windowWords says what a budget's window is.
func windowWords(b *v1alpha1.AgentBudget, now time.Time) string {
	w, st := b.Spec.Window, b.Status
	if w.Rolling != "" {
		return inert("the last " + w.Rolling + ", rolling")
	}
	tz := orDefault(w.TimeZone, "UTC")
	s := "this calendar " + strings.ToLower(string(w.Calendar)) + " (" + tz + ")"
	if st.WindowEnd != nil {
		s += ", until " + st.WindowEnd.Time.UTC().Format("2 Jan 15:04 MST")
	}
	return inert(s)
}

// coversWords says which runs a budget covers.
func coversWords(b *v1alpha1.AgentBudget) string {
	if b.Spec.Selector == nil {
		return "every AgentRun of " + b.Namespace
	}
	sel, err := b.Spec.Selector.Parse()
	if err != nil {
		return "every AgentRun of " + inert(b.Namespace) + ": its selector does not parse, and it holds them until it is fixed"
	}
	return inert("the AgentRuns labelled " + sel.String())
}
