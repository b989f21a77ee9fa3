package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/kubectlplugin/usagesum"
)

// The groupings of usage --by.
const (
	byNamespace = usagesum.ByNamespace
	byRuntime   = usagesum.ByRuntime
	byModel     = usagesum.ByModel
)

// usageSum is one row of the usage table, usageReport the table.
type (
	usageSum    = usagesum.Row
	usageReport = usagesum.Report
)

// sumUsage sums the runs' status.usage by namespace, runtime or model.
func sumUsage(runs []v1alpha1.AgentRun, by string) usageReport { return usagesum.Sum(runs, by) }

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

// printUsage writes the usage table, its total and notes on what it
// counts.
func printUsage(w io.Writer, rep usageReport) error {
	header := []string{strings.ToUpper(rep.By), "RUNS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "TOTAL", "COST"}
	cells := func(s usageSum) []string {
		return []string{s.Key, strconv.Itoa(s.Runs), fmtInt(s.Input), fmtInt(s.Output), fmtInt(s.CacheRead),
			fmtInt(s.CacheWrite), fmtInt(s.Total()), formatCost(s.Cost)}
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
		if r.Key == usagesum.OtherModels {
			notes = append(notes, usagesum.OtherModels+": tokens of runs whose status keeps only their largest models (usage.byModelTruncated).")
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
