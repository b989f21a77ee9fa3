package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// The groupings of usage --by.
const (
	byNamespace = "namespace"
	byRuntime   = "runtime"
	byModel     = "model"
)

// otherModels is the row of the tokens a run's status no longer splits by
// model (usage.byModelTruncated: only the largest models were kept).
const otherModels = "(other models)"

// unknownModel is the model of usage not split by model, the name the
// event stream and byModel use for usage without a model.
const unknownModel = "unknown"

// usageCmd prints tokens and cost summed over runs.
func usageCmd(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	all := fs.BoolP("all-namespaces", "A", false, "sum the runs of every namespace")
	selector := fs.StringP("selector", "l", "", "only runs with these labels (kubectl's label selector)")
	sinceFlag := fs.String("since", "", "only runs that ended within this long (30m, 24h, 7d), and runs in progress")
	by := fs.String("by", byModel, "one row per namespace, runtime or model")
	if code, done := parse(e, fs, kf, args, "kubectl agentrun usage [-n NS | -A] [-l SELECTOR] [--since DURATION] [--by namespace|runtime|model]"); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q: usage takes only flags", fs.Arg(0))
	}
	if *by != byNamespace && *by != byRuntime && *by != byModel {
		return usageError(e, fs, "--by %q: use namespace, runtime or model", *by)
	}
	var since time.Duration
	if *sinceFlag != "" {
		d, err := parseSince(*sinceFlag)
		if err != nil {
			return usageError(e, fs, "--since %q: %v", *sinceFlag, err)
		}
		since = d
	}
	k, err := kf.connect(e)
	if err != nil {
		return fail(e, fs, err)
	}
	runs, err := listRuns(ctx, k, *all, *selector)
	if err != nil {
		return fail(e, fs, err)
	}
	if since > 0 {
		runs = endedSince(runs, e.Now().Add(-since))
	}
	if len(runs) == 0 {
		msg := noRuns(k.ns, *all)
		if since > 0 {
			msg = strings.TrimSuffix(msg, ".") + fmt.Sprintf(" that ended within %s or are in progress.", *sinceFlag)
		}
		fmt.Fprintln(e.Stderr, msg)
		return 0
	}
	if err := printUsage(e.Stdout, sumUsage(runs, *by)); err != nil {
		return fail(e, fs, err)
	}
	return 0
}

// parseSince reads a Go duration, with days as well (7d, 1d12h): usage
// reports cover days more often than hours.
func parseSince(s string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 {
			return 0, fmt.Errorf("a duration such as 30m, 24h or 7d")
		}
		days = time.Duration(n) * 24 * time.Hour
		if s = s[i+1:]; s == "" && days > 0 {
			return days, nil
		}
		if s == "" {
			s = "0" // 0d: refused below
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || days+d == 0 {
		return 0, fmt.Errorf("a duration such as 30m, 24h or 7d")
	}
	return days + d, nil
}

// endedSince keeps the runs that ended at or after cutoff (by their
// completion time, or creation time when status has none), and every run
// in progress: what it used so far is recent.
func endedSince(runs []v1alpha1.AgentRun, cutoff time.Time) []v1alpha1.AgentRun {
	var out []v1alpha1.AgentRun
	for _, run := range runs {
		at := run.CreationTimestamp.Time
		if run.Status.CompletionTime != nil {
			at = run.Status.CompletionTime.Time
		}
		if !ended(&run) || !at.Before(cutoff) {
			out = append(out, run)
		}
	}
	return out
}

// usageSum is one row of the usage table.
type usageSum struct {
	Key        string
	Runs       int // runs counted in this row
	InProgress int // of which still in progress
	Input      int64
	Output     int64
	CacheRead  int64
	CacheWrite int64
	// Cost is the sum of the costs reported; nil when none was.
	Cost *big.Rat
	// NoCost counts the runs here with tokens but no cost (codex reports
	// none).
	NoCost int
}

// add counts one run's (or one model's) usage.
func (s *usageSum) add(c v1alpha1.TokenCounts, inProgress bool) {
	s.Runs++
	if inProgress {
		s.InProgress++
	}
	for _, f := range []struct {
		dst *int64
		v   *int64
	}{{&s.Input, c.InputTokens}, {&s.Output, c.OutputTokens}, {&s.CacheRead, c.CacheReadTokens}, {&s.CacheWrite, c.CacheWriteTokens}} {
		if f.v != nil {
			*f.dst += *f.v
		}
	}
	if cost, ok := parseCost(c.CostUSD); ok {
		if s.Cost == nil {
			s.Cost = new(big.Rat)
		}
		s.Cost.Add(s.Cost, cost)
	} else if tokensOf(c) > 0 {
		s.NoCost++
	}
}

func (s *usageSum) total() int64 { return s.Input + s.Output + s.CacheRead + s.CacheWrite }

func tokensOf(c v1alpha1.TokenCounts) int64 {
	var n int64
	for _, p := range []*int64{c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			n += *p
		}
	}
	return n
}

// usageReport is the usage table: its rows, sorted by key, and the total
// over runs (each run counted once).
type usageReport struct {
	By       string
	Rows     []usageSum
	Total    usageSum
	MultiRun bool // by model: some run counts in more than one row
}

// sumUsage sums the runs' status.usage by namespace, runtime or model.
// A run in progress counts with the usage its status has so far. By
// model, each byModel entry goes to its model's row; a run whose byModel
// was cut (byModelTruncated) puts what its entries miss of its totals in
// the "(other models)" row, and a run with usage but no byModel counts as
// "unknown", so the rows always add up to the total.
func sumUsage(runs []v1alpha1.AgentRun, by string) usageReport {
	rep := usageReport{By: by}
	rows := map[string]*usageSum{}
	row := func(key string) *usageSum {
		if rows[key] == nil {
			rows[key] = &usageSum{Key: key}
		}
		return rows[key]
	}
	for i := range runs {
		run := &runs[i]
		inProgress := !ended(run)
		var counts v1alpha1.TokenCounts
		if run.Status.Usage != nil {
			counts = run.Status.Usage.TokenCounts
		}
		rep.Total.add(counts, inProgress)
		switch by {
		case byNamespace:
			row(run.Namespace).add(counts, inProgress)
		case byRuntime:
			row(string(run.Spec.Runtime)).add(counts, inProgress)
		case byModel:
			rep.MultiRun = addByModel(run.Status.Usage, inProgress, row) || rep.MultiRun
		}
	}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	sort.Slice(rep.Rows, func(i, j int) bool {
		a, b := rep.Rows[i].Key, rep.Rows[j].Key
		if (a == otherModels) != (b == otherModels) {
			return b == otherModels
		}
		return a < b
	})
	return rep
}

// addByModel adds one run's usage to the model rows; it reports whether
// the run counted in more than one.
func addByModel(u *v1alpha1.Usage, inProgress bool, row func(string) *usageSum) bool {
	if u == nil {
		return false
	}
	if len(u.ByModel) == 0 {
		if tokensOf(u.TokenCounts) > 0 || u.CostUSD != "" {
			row(unknownModel).add(u.TokenCounts, inProgress)
		}
		return false
	}
	var split usageSum
	for model, c := range u.ByModel {
		row(model).add(c, inProgress)
		split.add(c, false)
	}
	rows := len(u.ByModel)
	if u.ByModelTruncated {
		if rest, ok := remainder(u.TokenCounts, split); ok {
			row(otherModels).add(rest, inProgress)
			rows++
		}
	}
	return rows > 1
}

// remainder is what the run's totals hold beyond the byModel entries
// summed in split; ok is false when nothing is left.
func remainder(total v1alpha1.TokenCounts, split usageSum) (v1alpha1.TokenCounts, bool) {
	var rest v1alpha1.TokenCounts
	var left bool
	for _, f := range []struct {
		dst **int64
		v   *int64
		got int64
	}{{&rest.InputTokens, total.InputTokens, split.Input}, {&rest.OutputTokens, total.OutputTokens, split.Output},
		{&rest.CacheReadTokens, total.CacheReadTokens, split.CacheRead}, {&rest.CacheWriteTokens, total.CacheWriteTokens, split.CacheWrite}} {
		if f.v != nil && *f.v > f.got {
			n := *f.v - f.got
			*f.dst, left = &n, true
		}
	}
	if cost, ok := parseCost(total.CostUSD); ok {
		if split.Cost != nil {
			cost.Sub(cost, split.Cost)
		}
		if cost.Sign() > 0 {
			rest.CostUSD, left = cost.RatString(), true // exact; parseCost reads "a/b" too
		}
	}
	return rest, left
}

// printUsage writes the usage table, its total and notes on what it
// counts.
func printUsage(w io.Writer, rep usageReport) error {
	header := []string{strings.ToUpper(rep.By), "RUNS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "TOTAL", "COST"}
	cells := func(s usageSum) []string {
		return []string{s.Key, strconv.Itoa(s.Runs), fmtInt(s.Input), fmtInt(s.Output), fmtInt(s.CacheRead),
			fmtInt(s.CacheWrite), fmtInt(s.total()), formatCost(s.Cost)}
	}
	var rows [][]string
	for _, r := range rep.Rows {
		rows = append(rows, cells(r))
	}
	total := rep.Total
	total.Key = "TOTAL"
	rows = append(rows, cells(total))
	if err := writeTable(w, header, rows); err != nil {
		return err
	}
	var notes []string
	if n := rep.Total.InProgress; n > 0 {
		notes = append(notes, fmt.Sprintf("%s still in progress: the usage so far is counted.", plural(n, "run is", "runs are")))
	}
	if n := rep.Total.NoCost; n > 0 {
		notes = append(notes, fmt.Sprintf("%s no cost (codex reports none): COST sums the others.", plural(n, "run reported tokens but", "runs reported tokens but")))
	}
	if rep.MultiRun {
		notes = append(notes, "A run that used several models counts in the RUNS of each.")
	}
	for _, r := range rep.Rows {
		if r.Key == otherModels {
			notes = append(notes, otherModels+": tokens of runs whose status keeps only their largest models (usage.byModelTruncated).")
		}
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

// plural is "1 run is" or "3 runs are".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
