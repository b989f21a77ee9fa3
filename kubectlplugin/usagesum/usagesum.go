// Package usagesum sums AgentRuns' status.usage, exactly (costs as
// decimals), by namespace, runtime or model, so that the rows always add
// up to the total: `kubectl agentrun usage` prints the sums, and the ui's
// spend page charts them.
package usagesum

import (
	"math/big"
	"sort"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// The groupings of usage --by.
const (
	ByNamespace = "namespace"
	ByRuntime   = "runtime"
	ByModel     = "model"
)

// OtherModels is the row of the tokens a run's status no longer splits by
// model (usage.byModelTruncated: only the largest models were kept).
const OtherModels = "(other models)"

// UnknownModel is the model of usage not split by model, the name the
// event stream and ByModel use for usage without a model.
const UnknownModel = "unknown"

// Row is one row of the usage table.
type Row struct {
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

// Add counts one run's (or one model's) usage.
func (s *Row) Add(c v1alpha1.TokenCounts, inProgress bool) {
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
	if cost, ok := ParseCost(c.CostUSD); ok {
		if s.Cost == nil {
			s.Cost = new(big.Rat)
		}
		s.Cost.Add(s.Cost, cost)
	} else if c.Tokens() > 0 {
		s.NoCost++
	}
}

// Total is the row's tokens of all four kinds.
func (s *Row) Total() int64 { return s.Input + s.Output + s.CacheRead + s.CacheWrite }

// Report is the usage table: its rows, sorted by key, and the total
// over runs (each run counted once).
type Report struct {
	By       string
	Rows     []Row
	Total    Row
	MultiRun bool // by model: some run counts in more than one row
}

// Sum sums the runs' status.usage by namespace, runtime or model.
// A run in progress counts with the usage its status has so far. By
// model, each byModel entry goes to its model's row; a run whose byModel
// was cut (byModelTruncated) puts what its entries miss of its totals in
// the "(other models)" row, and a run with usage but no byModel counts as
// "unknown", so the rows always add up to the total.
func Sum(runs []v1alpha1.AgentRun, by string) Report {
	rep := Report{By: by}
	rows := map[string]*Row{}
	row := func(key string) *Row {
		if rows[key] == nil {
			rows[key] = &Row{Key: key}
		}
		return rows[key]
	}
	for i := range runs {
		run := &runs[i]
		inProgress := run.Status.Phase != v1alpha1.PhaseSucceeded && run.Status.Phase != v1alpha1.PhaseFailed
		var counts v1alpha1.TokenCounts
		if run.Status.Usage != nil {
			counts = run.Status.Usage.TokenCounts
		}
		rep.Total.Add(counts, inProgress)
		switch by {
		case ByNamespace:
			row(run.Namespace).Add(counts, inProgress)
		case ByRuntime:
			row(string(run.Spec.Runtime)).Add(counts, inProgress)
		case ByModel:
			rep.MultiRun = addByModel(run.Status.Usage, inProgress, row) || rep.MultiRun
		}
	}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	sort.Slice(rep.Rows, func(i, j int) bool {
		a, b := rep.Rows[i].Key, rep.Rows[j].Key
		if (a == OtherModels) != (b == OtherModels) {
			return b == OtherModels
		}
		return a < b
	})
	return rep
}

// addByModel adds one run's usage to the model rows; it reports whether
// the run counted in more than one.
func addByModel(u *v1alpha1.Usage, inProgress bool, row func(string) *Row) bool {
	if u == nil {
		return false
	}
	if len(u.ByModel) == 0 {
		if u.TokenCounts.Tokens() > 0 || u.CostUSD != "" {
			row(UnknownModel).Add(u.TokenCounts, inProgress)
		}
		return false
	}
	var split Row
	for model, c := range u.ByModel {
		row(model).Add(c, inProgress)
		split.Add(c, false)
	}
	rows := len(u.ByModel)
	if u.ByModelTruncated {
		if rest, ok := remainder(u.TokenCounts, split); ok {
			row(OtherModels).Add(rest, inProgress)
			rows++
		}
	}
	return rows > 1
}

// remainder is what the run's totals hold beyond the byModel entries
// summed in split; ok is false when nothing is left.
func remainder(total v1alpha1.TokenCounts, split Row) (v1alpha1.TokenCounts, bool) {
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
	if cost, ok := ParseCost(total.CostUSD); ok {
		if split.Cost != nil {
			cost.Sub(cost, split.Cost)
		}
		if cost.Sign() > 0 {
			rest.CostUSD, left = cost.RatString(), true // exact; parseCost reads "a/b" too
		}
	}
	return rest, left
}

// ParseCost reads status.usage.costUSD, a decimal string, exactly: sums
// of many runs' costs stay exact until they are shown.
func ParseCost(s string) (*big.Rat, bool) {
	if s == "" {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}
