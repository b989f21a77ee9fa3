package v1alpha1

import "github.com/agentrun-dev/agentrun/events"

// The token rules of status.usage, for the manager and for readers of the
// API (kubectl agentrun get, usage and ui): the event stream's own
// (events.TokenCounts), so a total means the same everywhere.

// Tokens is every token of c, the four kinds added.
func (c TokenCounts) Tokens() int64 { return c.eventCounts().Tokens() }

// Total is Tokens, or nil when none of the four kinds is set.
func (c TokenCounts) Total() *int64 { return c.eventCounts().Total() }

func (c TokenCounts) eventCounts() events.TokenCounts {
	return events.TokenCounts{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
		CacheReadTokens: c.CacheReadTokens, CacheWriteTokens: c.CacheWriteTokens}
}

// Tokens is the usage's token total: totalTokens, which the manager writes
// by this rule, or the four kinds added for a status written without it;
// false when the usage reports no tokens at all.
func (u *Usage) Tokens() (int64, bool) {
	if u == nil {
		return 0, false
	}
	if u.TotalTokens != nil {
		return *u.TotalTokens, true
	}
	if t := u.TokenCounts.Total(); t != nil {
		return *t, true
	}
	return 0, false
}
