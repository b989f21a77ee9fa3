package text

import (
	"strconv"
	"strings"

	"github.com/agentrun-dev/agentrun/events"
)

// FormatTokens writes a token count the way text and the rich panel show it:
// below 100 the number itself; below 1,000,000 thousands with one decimal
// and "k" (912 → "0.9k"); else millions with one decimal and "M".
//
// The decimal is printf's %.1f (correctly rounded, exact ties to even), and
// the unit is chosen by the value, as docs/events.md words it: 999_999 is below a
// million, so it is "1000.0k"; 1_250_000 is "1.2M".
func FormatTokens(n int64) string {
	switch {
	case n < 100:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	default:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	}
}

// FormatSeconds writes a duration in milliseconds as seconds with one
// decimal and "s" (12400 → "12.4s"). The tenths are cut, not rounded, as a
// stopwatch shows them: 31250 is "31.2s".
func FormatSeconds(ms int64) string {
	neg := ms < 0
	if neg {
		ms = -ms
	}
	s := strconv.FormatInt(ms/1000, 10) + "." + strconv.FormatInt(ms%1000/100, 10) + "s"
	if neg {
		s = "-" + s
	}
	return s
}

// FormatCost writes a cost in US dollars with four decimals ("$0.0437").
func FormatCost(usd float64) string {
	return "$" + strconv.FormatFloat(usd, 'f', 4, 64)
}

// UsageItems returns the three items of the usage string, each "" when it is
// omitted: in is "in X" with X = input + cache read + cache write (missing
// ones not counted; omitted when all three are missing), out is "out Y"
// (omitted when output is missing), cached is "cached N%" with N the cache
// read share of X rounded half up (omitted when cache read is missing or X
// is 0).
func UsageItems(c events.TokenCounts) (in, out, cached string) {
	var x int64
	if c.InputTokens != nil || c.CacheReadTokens != nil || c.CacheWriteTokens != nil {
		for _, p := range []*int64{c.InputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
			if p != nil {
				x += *p
			}
		}
		in = "in " + FormatTokens(x)
	}
	if c.OutputTokens != nil {
		out = "out " + FormatTokens(*c.OutputTokens)
	}
	if c.CacheReadTokens != nil && x > 0 {
		cached = "cached " + strconv.FormatInt(percent(*c.CacheReadTokens, x), 10) + "%"
	}
	return in, out, cached
}

// percent is part/whole*100 rounded half up (四舍五入), in integers so
// that no float error moves a tie.
func percent(part, whole int64) int64 {
	if whole < 0 {
		part, whole = -part, -whole
	}
	n := 200*part + whole
	q := n / (2 * whole)
	if n%(2*whole) != 0 && n < 0 {
		q-- // floor for negative values (never happens with real counts)
	}
	return q
}

// FormatUsage is the usage string "in X  out Y  cached N%": the items that
// are not omitted, two spaces apart; "" when all three are omitted. Callers
// put two spaces before it.
func FormatUsage(c events.TokenCounts) string {
	in, out, cached := UsageItems(c)
	return JoinItems(in, out, cached)
}

// JoinItems joins the non-empty items with two spaces, the separator of the
// usage string and of everything that follows it on a line.
func JoinItems(items ...string) string {
	var b strings.Builder
	for _, it := range items {
		if it == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("  ")
		}
		b.WriteString(it)
	}
	return b.String()
}

// OneLine prepares end.detail for the end line: the newlines at its end are
// removed and every other newline (\r\n, \n or \r) becomes one space.
func OneLine(s string) string {
	s = strings.TrimRight(s, "\r\n")
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			b.WriteByte(' ')
		case '\n':
			b.WriteByte(' ')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
