package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// resultWidth is how much of the result's first line RESULT shows: the
// rest of the row is about 80 columns, so the row fits a 140-column
// terminal.
const resultWidth = 60

// getCmd prints the wide table of one run or of the runs in a namespace.
func getCmd(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	all := fs.BoolP("all-namespaces", "A", false, "list the runs of every namespace")
	selector := fs.StringP("selector", "l", "", "only runs with these labels (kubectl's label selector)")
	if code, done := parse(e, fs, kf, args, "kubectl agentrun get [NAME] [-n NS | -A] [-l SELECTOR]"); done {
		return code
	}
	if fs.NArg() > 1 {
		return usageError(e, fs, "expected at most one run name, got %d", fs.NArg())
	}
	if fs.NArg() == 1 && (*all || *selector != "") {
		return usageError(e, fs, "a run is named in one namespace: drop -A and -l with NAME")
	}
	k, err := kf.connect(e)
	if err != nil {
		return fail(e, fs, err)
	}
	var runs []v1alpha1.AgentRun
	if fs.NArg() == 1 {
		run := &v1alpha1.AgentRun{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: fs.Arg(0)}, run); err != nil {
			return fail(e, fs, err)
		}
		runs = append(runs, *run)
	} else {
		runs, err = listRuns(ctx, k, *all, *selector)
		if err != nil {
			return fail(e, fs, err)
		}
		if len(runs) == 0 {
			fmt.Fprintln(e.Stderr, noRuns(k.ns, *all))
			return 0
		}
	}
	if err := printRuns(e.Stdout, runs, *all, e.Now()); err != nil {
		return fail(e, fs, err)
	}
	return 0
}

// listRuns lists the runs of the request's namespace, or of all with -A,
// by namespace, then oldest first (a run's place in time says more than
// its generated name), then name.
func listRuns(ctx context.Context, k *kube, all bool, selector string) ([]v1alpha1.AgentRun, error) {
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.InNamespace(k.ns))
	}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, fmt.Errorf("-l %q: %w", selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	list := &v1alpha1.AgentRunList{}
	if err := k.c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	sortRuns(list.Items)
	return list.Items, nil
}

// sortRuns orders runs by namespace, then oldest first, then name.
func sortRuns(runs []v1alpha1.AgentRun) {
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := runs[i], runs[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// noRuns is kubectl's sentence for an empty list.
func noRuns(ns string, all bool) string {
	if all {
		return "No AgentRuns found."
	}
	return fmt.Sprintf("No AgentRuns found in %s namespace.", ns)
}

// printRuns writes the table of get.
func printRuns(w io.Writer, runs []v1alpha1.AgentRun, withNamespace bool, now time.Time) error {
	header := []string{"NAME", "STATUS", "REASON", "TOKENS", "COST", "DURATION", "AGE", "RESULT"}
	// CHANGE only when a run works on a repository (spec.git).
	withChange := false
	for i := range runs {
		withChange = withChange || runs[i].Spec.Git != nil
	}
	if withChange {
		header = append(header[:len(header)-1:len(header)-1], "CHANGE", "RESULT")
	}
	if withNamespace {
		header = append([]string{"NAMESPACE"}, header...)
	}
	rows := make([][]string, 0, len(runs))
	for i := range runs {
		row := runRow(&runs[i], now)
		if withChange {
			row = append(row[:len(row)-1:len(row)-1], changeCell(&runs[i]), row[len(row)-1])
		}
		if withNamespace {
			row = append([]string{runs[i].Namespace}, row...)
		}
		rows = append(rows, row)
	}
	return writeTable(w, header, rows)
}

// runRow is one run's cells: NAME, STATUS (the phase), REASON (of the
// Succeeded condition), TOKENS (all four kinds), COST, DURATION (end's
// duration_ms; while running, the time since the agent started), AGE and
// RESULT (the result's first line; for a run that ended without one, the
// detail's, which says why).
func runRow(run *v1alpha1.AgentRun, now time.Time) []string {
	st := run.Status
	tokens := none
	if n, ok := st.Usage.Tokens(); ok {
		tokens = text.FormatTokens(n)
	}
	age := none
	if !run.CreationTimestamp.IsZero() {
		age = duration.HumanDuration(now.Sub(run.CreationTimestamp.Time))
	}
	res := ""
	if st.Result != nil {
		res = firstLine(*st.Result, resultWidth)
	}
	if res == "" && ended(run) {
		res = firstLine(st.Detail, resultWidth)
	}
	return []string{run.Name, orNone(string(st.Phase)), orNone(succeededReason(run)), tokens, costCell(st.Usage),
		runDuration(run, now), age, orNone(res)}
}

// runDuration is the DURATION cell.
func runDuration(run *v1alpha1.AgentRun, now time.Time) string {
	st := run.Status
	switch {
	case st.DurationMs != nil:
		return formatDuration(time.Duration(*st.DurationMs) * time.Millisecond)
	case st.StartTime == nil:
		return none
	case st.CompletionTime != nil:
		return formatDuration(st.CompletionTime.Sub(st.StartTime.Time))
	case !ended(run):
		return formatDuration(now.Sub(st.StartTime.Time))
	}
	return none
}

// changeCell is the CHANGE cell: the diff stat and where it went (the
// run's branch, or "patch"), "unchanged", or none.
func changeCell(run *v1alpha1.AgentRun) string {
	g := run.Status.Git
	switch {
	case g == nil:
		return none
	case g.BaseCommit == g.HeadCommit:
		return "unchanged"
	case g.Pushed:
		return g.DiffStat + " " + g.Branch
	case g.PatchConfigMap != "":
		return g.DiffStat + " patch"
	}
	return g.DiffStat + " unpublished"
}
