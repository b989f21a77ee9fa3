package events

import "sort"

// Sums follow docs/events.md ("Usage totals"): only non-null values are added, and a field that no
// source reported stays null.

func addInt(dst **int64, v *int64) {
	if v == nil {
		return
	}
	if *dst == nil {
		n := *v
		*dst = &n
		return
	}
	**dst += *v
}

func addFloat(dst **float64, v *float64) {
	if v == nil {
		return
	}
	if *dst == nil {
		n := *v
		*dst = &n
		return
	}
	**dst += *v
}

// Add adds the non-null fields of o to c.
func (c *TokenCounts) Add(o TokenCounts) {
	addInt(&c.InputTokens, o.InputTokens)
	addInt(&c.OutputTokens, o.OutputTokens)
	addInt(&c.CacheReadTokens, o.CacheReadTokens)
	addInt(&c.CacheWriteTokens, o.CacheWriteTokens)
	addFloat(&c.CostUSD, o.CostUSD)
}

// IsZero reports whether no field was reported.
func (c TokenCounts) IsZero() bool {
	return c.InputTokens == nil && c.OutputTokens == nil && c.CacheReadTokens == nil &&
		c.CacheWriteTokens == nil && c.CostUSD == nil
}

// Clone returns a deep copy.
func (c TokenCounts) Clone() TokenCounts {
	var out TokenCounts
	out.Add(c)
	return out
}

// Context is input + cache read + cache write, the whole context sent to the
// model; null when any of the three is null.
func (c TokenCounts) Context() *int64 {
	if c.InputTokens == nil || c.CacheReadTokens == nil || c.CacheWriteTokens == nil {
		return nil
	}
	n := *c.InputTokens + *c.CacheReadTokens + *c.CacheWriteTokens
	return &n
}

// NewTotals returns an empty total (five nulls, by_model {}).
func NewTotals() Totals { return Totals{ByModel: map[string]TokenCounts{}} }

// AddModel adds c to the total and to the by_model entry of model ("" means
// unknown).
func (t *Totals) AddModel(model string, c TokenCounts) {
	if t.ByModel == nil {
		t.ByModel = map[string]TokenCounts{}
	}
	if model == "" {
		model = UnknownModel
	}
	t.TokenCounts.Add(c)
	m := t.ByModel[model]
	m.Add(c)
	t.ByModel[model] = m
}

// Clone returns a deep copy.
func (t Totals) Clone() Totals {
	out := NewTotals()
	out.TokenCounts = t.TokenCounts.Clone()
	for k, v := range t.ByModel {
		out.ByModel[k] = v.Clone()
	}
	return out
}

// Counts returns the token fields of a usage event.
func (u *Usage) Counts() TokenCounts {
	return TokenCounts{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CostUSD: u.CostUSD}
}

// Int64 returns a pointer to v (for literals).
func Int64(v int64) *int64 { return &v }

// Int returns a pointer to v.
func Int(v int) *int { return &v }

// Float64 returns a pointer to v.
func Float64(v float64) *float64 { return &v }

// String returns a pointer to v.
func String(v string) *string { return &v }

// Bool returns a pointer to v.
func Bool(v bool) *bool { return &v }

// StringOrNil returns nil for "" and a pointer otherwise.
func StringOrNil(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// Tokens is every token of c, the four kinds added (a field not reported
// counts 0): what a total, a budget, --max-tokens and the plugin's TOKENS
// count. It is the one rule for a token total; Total is the same with
// "nothing reported" kept apart.
func (c TokenCounts) Tokens() int64 {
	var n int64
	for _, p := range []*int64{c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			n += *p
		}
	}
	return n
}

// Total is Tokens, or nil when none of the four kinds was reported
// (status.usage.totalTokens is then absent).
func (c TokenCounts) Total() *int64 {
	if c.InputTokens == nil && c.OutputTokens == nil && c.CacheReadTokens == nil && c.CacheWriteTokens == nil {
		return nil
	}
	n := c.Tokens()
	return &n
}

// ModelsBySize is the models of byModel with the most tokens first (then
// by name): the order in which a bounded split keeps them.
func ModelsBySize(byModel map[string]TokenCounts) []string {
	names := make([]string, 0, len(byModel))
	for m := range byModel {
		names = append(names, m)
	}
	sort.Slice(names, func(i, j int) bool {
		ti, tj := byModel[names[i]].Tokens(), byModel[names[j]].Tokens()
		if ti != tj {
			return ti > tj
		}
		return names[i] < names[j]
	})
	return names
}

// Bounded is a copy of t whose by_model holds at most n models, those
// with the most tokens (ModelsBySize), and whether any was left out. The
// totals stay whole: what the kept models lack is the left-out models'.
func (t Totals) Bounded(n int) (Totals, bool) {
	if len(t.ByModel) <= n {
		return t.Clone(), false
	}
	out := Totals{TokenCounts: t.TokenCounts.Clone(), ByModel: make(map[string]TokenCounts, n)}
	for _, m := range ModelsBySize(t.ByModel)[:max(n, 0)] {
		out.ByModel[m] = t.ByModel[m].Clone()
	}
	return out, true
}
