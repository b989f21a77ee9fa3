package usagesum

import (
	"testing"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

func i64(n int64) *int64 { return &n }

func counts(in, out, cr, cw int64, cost string) v1alpha1.TokenCounts {
	return v1alpha1.TokenCounts{InputTokens: i64(in), OutputTokens: i64(out), CacheReadTokens: i64(cr), CacheWriteTokens: i64(cw), CostUSD: cost}
}

// TestSumExact: costs are summed as decimals, not floats: ten runs
// of $0.1 are $1, and a run's long decimal is kept to the last digit.
func TestSumExact(t *testing.T) {
	var runs []v1alpha1.AgentRun
	for range 10 {
		runs = append(runs, v1alpha1.AgentRun{Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded,
			Usage: &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{CostUSD: "0.1"}}}})
	}
	runs = append(runs, v1alpha1.AgentRun{Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded,
		Usage: &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{CostUSD: "0.0015375000000000002"}}}})
	rep := Sum(runs, ByNamespace)
	if got := rep.Total.Cost.FloatString(19); got != "1.0015375000000000002" {
		t.Errorf("total cost %s", got)
	}
	if rep.Total.Runs != 11 || rep.Total.InProgress != 0 || rep.Total.NoCost != 0 {
		t.Errorf("total %+v", rep.Total)
	}
}

// TestSumUnknownModel: usage without a ByModel split counts as the
// model "unknown"; a run without usage counts in the total only.
func TestSumUnknownModel(t *testing.T) {
	runs := []v1alpha1.AgentRun{
		{Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, Usage: &v1alpha1.Usage{TokenCounts: counts(1, 2, 3, 4, "0.01")}}},
		{Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed}},
	}
	rep := Sum(runs, ByModel)
	if len(rep.Rows) != 1 || rep.Rows[0].Key != UnknownModel || rep.Rows[0].Total() != 10 || rep.Rows[0].Runs != 1 {
		t.Errorf("rows %+v", rep.Rows)
	}
	if rep.Total.Runs != 2 || rep.Total.Total() != 10 || rep.MultiRun {
		t.Errorf("total %+v, multi %t", rep.Total, rep.MultiRun)
	}
}
