package controllers

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// Price is what a model costs, in US dollars per million tokens of each
// kind (the kinds of docs/events.md, "usage": input without cache hits,
// output, cache reads, cache writes).
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// Prices is the admin's price table (the chart's prices, the manager's
// --prices): a model name, or a prefix ending in "*", to its price. It
// prices the usage of runtimes that report no cost (codex, dsh, and
// claude-code's calls until its own total at the end), marked as an
// estimate wherever it shows.
type Prices map[string]Price

// ParsePrices reads the table from JSON ({"gpt-5.5": {"input": 1.25,
// "output": 10, ...}}); an empty string is no table.
func ParsePrices(s string) (Prices, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var p Prices
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("prices: %w (want {\"MODEL\": {\"input\": USD, \"output\": USD, \"cacheRead\": USD, \"cacheWrite\": USD}}, per million tokens)", err)
	}
	for m, pr := range p {
		if m == "" {
			return nil, fmt.Errorf("prices: an empty model name")
		}
		for _, v := range []float64{pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("prices: %s: a price must be a number of US dollars, 0 or more", m)
			}
		}
	}
	return p, nil
}

// lookup finds a model's price: its exact name first, then the longest
// prefix entry ("gpt-5*").
func (p Prices) lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	best, found := "", false
	for k := range p {
		if prefix, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(model, prefix) && (!found || len(prefix) > len(best)) {
			best, found = prefix, true
		}
	}
	if found {
		return p[best+"*"], true
	}
	return Price{}, false
}

// Models are the table's exact model names, sorted.
func (p Prices) Models() []string {
	var out []string
	for k := range p {
		if !strings.HasSuffix(k, "*") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// estimateCost completes a usage with the table: every model entry that
// has tokens and no cost gets the table's price for them, marked as an
// estimate; the total gets the sum when the runtime gave no total cost and
// every model with tokens now has one. The runtime's own figures are never
// changed. It returns u itself, changed in place.
func estimateCost(u *v1alpha1.Usage, p Prices) *v1alpha1.Usage {
	if u == nil || len(p) == 0 {
		return u
	}
	estimated := false
	for m, c := range u.ByModel {
		if c.CostUSD != "" || c.Tokens() == 0 {
			continue
		}
		pr, ok := p.lookup(m)
		if !ok {
			continue
		}
		c.CostUSD = formatUSD(pr.cost(c))
		c.CostEstimated = true
		u.ByModel[m] = c
		estimated = true
	}
	if u.CostUSD != "" || !estimated || u.ByModelTruncated {
		return u
	}
	var sum float64
	var inModels int64
	for _, c := range u.ByModel {
		if c.CostUSD == "" && c.Tokens() > 0 {
			return u // a model without a price: no total cost to show
		}
		f, _ := strconv.ParseFloat(c.CostUSD, 64)
		sum += f
		inModels += c.Tokens()
	}
	if inModels < u.TokenCounts.Tokens() {
		return u // tokens outside the split cannot be priced
	}
	u.CostUSD = formatUSD(sum)
	u.CostEstimated = true
	return u
}

func (pr Price) cost(c v1alpha1.TokenCounts) float64 {
	v := func(p *int64) float64 {
		if p == nil {
			return 0
		}
		return float64(*p)
	}
	return (v(c.InputTokens)*pr.Input + v(c.OutputTokens)*pr.Output +
		v(c.CacheReadTokens)*pr.CacheRead + v(c.CacheWriteTokens)*pr.CacheWrite) / 1e6
}

// formatUSD writes an estimate rounded to a billionth of a dollar, so that
// sums of estimates read as decimals (0.3, not 0.30000000000000004).
func formatUSD(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e9)/1e9, 'f', -1, 64)
}
