// The end summary: the compact form of one run's end, the agent
// container's termination message.
//
// It holds the end event's status, exit code, detail, duration, usage (with
// the per-model split), session id and result, plus the aggregator's
// counters, encoded as one JSON object of at most MaxBytes bytes. The runner
// writes Encode's bytes to the agent container's termination message file
// (`agentrun run --summary FILE`); the controller reads them back from the
// Pod's status with Decode. Kubernetes keeps at most 4096 bytes of a
// container's termination message, so Encode cuts what does not fit (the
// result first, then the by-model split, then the detail) and marks every
// cut: a reader that needs the whole of a cut field reads the end event
// from the event log instead, where nothing is cut.
//
// Field names follow the end event of docs/events.md (snake_case, the same usage
// object); the counters keep the aggregator's names.

package podcontract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"unicode/utf8"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
)

// MaxBytes is the largest encoded summary: the kubelet keeps at most 4096
// bytes of a container's termination message and silently drops the rest.
const MaxBytes = 4096

// Version is the summary format version; it goes up only when an existing
// field is removed or changes meaning.
const Version = 1

// maxDetailBytes bounds the detail before anything else is cut: documented
// details are short (the last 500 characters of stderr at most), and a
// runtime's own error message must not crowd out the usage split and the
// result.
const maxDetailBytes = 1024

// minResultBytes is the room kept for the result while the by-model split is
// trimmed: the start of the answer is worth more than the tenth model's
// token counts, which the event log keeps in full anyway.
const minResultBytes = 1024

// maxSessionIDBytes bounds the session id: agentrun's own ids are UUIDs
// (36 bytes); a resumed run may carry a longer id of the runtime's own.
const maxSessionIDBytes = 256

// Summary is one run's end summary.
type Summary struct {
	Version    int    `json:"v"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	Detail     string `json:"detail"`
	DurationMs int64  `json:"duration_ms"`
	// Usage is end.usage. When ByModelCut is set, by_model holds only the
	// models with the most tokens; the totals are always whole.
	Usage     events.Totals       `json:"usage"`
	SessionID *string             `json:"session_id"`
	Counters  aggregator.Counters `json:"counters"`
	Result    *string             `json:"result"`
	// ResultBytes is the length in bytes of the whole result, cut or not.
	ResultBytes int `json:"result_bytes"`

	// TraceID is the run's OpenTelemetry trace id (start.trace_id); empty
	// when the run exported no telemetry.
	TraceID string `json:"trace_id,omitempty"`

	// Isolation is how the agent was isolated; nil when the run ended
	// before its sandbox was tried (a rejected request).
	Isolation *Isolation `json:"isolation,omitempty"`

	// The cut marks: the field holds a prefix (a subset for by_model) of
	// the end event's value.
	ResultCut    bool `json:"result_cut,omitempty"`
	DetailCut    bool `json:"detail_cut,omitempty"`
	ByModelCut   bool `json:"by_model_cut,omitempty"`
	SessionIDCut bool `json:"session_id_cut,omitempty"`
}

// Isolation is how the agent ran: start.sandbox and start.network, or why
// the sandbox could not be built on this node.
type Isolation struct {
	Sandbox         string `json:"sandbox"`
	NetworkMode     string `json:"network_mode"`
	NetworkEnforced bool   `json:"network_enforced"`
	// Unavailable: the sandbox could not be built on this node, so the
	// run failed before the agent started; the summary's detail says why
	// and how to fix it.
	Unavailable bool `json:"unavailable,omitempty"`
}

// FromEnd builds the whole (uncut) summary of an end event and the
// aggregator's counters. A nil end gives a failed summary that says so.
func FromEnd(end *events.End, c aggregator.Counters) Summary {
	if end == nil {
		return Summary{Version: Version, Status: events.StatusFailed,
			Detail: "agentrun ended without an end event", Usage: events.Totals{ByModel: map[string]events.TokenCounts{}},
			Counters: c}
	}
	s := Summary{
		Version:    Version,
		Status:     end.Status,
		ExitCode:   cloneInt(end.ExitCode),
		Detail:     end.Detail,
		DurationMs: end.DurationMs,
		Usage:      cloneTotals(end.Usage),
		SessionID:  cloneString(end.SessionID),
		Counters:   c,
		Result:     cloneString(end.Result),
	}
	if s.Result != nil {
		s.ResultBytes = len(*s.Result)
	}
	return s
}

// Cut reports whether any field holds less than the end event had.
func (s Summary) Cut() bool { return s.ResultCut || s.DetailCut || s.ByModelCut || s.SessionIDCut }

// Encode returns the summary as JSON of at most MaxBytes bytes, cutting and
// marking what does not fit.
func (s Summary) Encode() []byte { return s.fit(MaxBytes) }

// Decode parses an encoded summary. Anything that is not a version-1
// summary (an empty or foreign termination message) is an error.
func Decode(b []byte) (Summary, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return Summary{}, errors.New("empty summary")
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return Summary{}, fmt.Errorf("not an agentrun end summary: %w", err)
	}
	if s.Version != Version {
		return Summary{}, fmt.Errorf("unsupported end summary version %d (this agentrun reads version %d)", s.Version, Version)
	}
	if s.Status == "" {
		return Summary{}, errors.New("end summary without a status")
	}
	if s.Usage.ByModel == nil {
		s.Usage.ByModel = map[string]events.TokenCounts{}
	}
	return s, nil
}

// fit encodes s within limit bytes. The order of cuts: the detail to
// maxDetailBytes; the by-model split (smallest models first) until the rest
// leaves minResultBytes for the result; the detail further; the session id
// as a last resort; then the result takes what is left.
func (s Summary) fit(limit int) []byte {
	s.Usage = cloneTotals(s.Usage)
	if s.Usage.ByModel == nil {
		s.Usage.ByModel = map[string]events.TokenCounts{}
	}
	full := s.Result
	if full != nil {
		s.ResultBytes = len(*full)
	}
	if b := encode(s); len(b) <= limit {
		return b
	}
	// A session id is only useful whole: one too long to leave room for
	// the rest is dropped (and marked) before anything else is cut.
	if s.SessionID != nil && quotedLen(*s.SessionID) > maxSessionIDBytes {
		s.SessionID, s.SessionIDCut = nil, true
		if b := encode(s); len(b) <= limit {
			return b
		}
	}

	// Measure the rest with an empty result in place of the real one.
	if full != nil {
		empty := ""
		s.Result = &empty
		s.ResultCut = len(*full) > 0
	}
	if d, cut := fitString(s.Detail, maxDetailBytes); cut {
		s.Detail, s.DetailCut = d, true
	}
	reserve := 0
	if full != nil && len(*full) > 0 {
		reserve = min(minResultBytes, quotedLen(*full)-2)
	}
	if len(encode(s)) > limit-reserve {
		s.trimByModel(limit - reserve)
	}
	if n := len(encode(s)); n > limit {
		s.Detail, s.DetailCut = cutToFit(s, limit, s.Detail, func(s *Summary, v string) { s.Detail = v }), true
	}
	if n := len(encode(s)); n > limit && s.SessionID != nil {
		s.SessionID, s.SessionIDCut = nil, true
	}
	if full != nil && len(*full) > 0 {
		r := cutToFit(s, limit, *full, func(s *Summary, v string) { s.Result = &v })
		s.Result = &r
		s.ResultCut = len(r) < len(*full)
	}
	return encode(s)
}

// trimByModel keeps the models with the most tokens (then by name) that fit
// within limit, and marks the cut.
func (s *Summary) trimByModel(limit int) {
	names := make([]string, 0, len(s.Usage.ByModel))
	for m := range s.Usage.ByModel {
		names = append(names, m)
	}
	sort.Slice(names, func(i, j int) bool {
		ti, tj := tokens(s.Usage.ByModel[names[i]]), tokens(s.Usage.ByModel[names[j]])
		if ti != tj {
			return ti > tj
		}
		return names[i] < names[j]
	})
	all := s.Usage.ByModel
	keep := func(k int) {
		s.Usage.ByModel = make(map[string]events.TokenCounts, k)
		for _, m := range names[:k] {
			s.Usage.ByModel[m] = all[m]
		}
	}
	s.ByModelCut = true
	// The largest k that fits; each entry takes at least 100 bytes, so
	// the search never encodes more than a few kilobytes.
	lo, hi := 0, min(len(names), limit/100+1)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		keep(mid)
		if len(encode(*s)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	keep(lo)
	s.ByModelCut = lo < len(names)
}

func tokens(c events.TokenCounts) int64 {
	var n int64
	for _, p := range []*int64{c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			n += *p
		}
	}
	return n
}

// cutToFit returns the longest prefix of v (at a UTF-8 boundary) that, set
// into s with set, keeps the encoding within limit bytes. s holds the empty
// string in that place when it is called.
func cutToFit(s Summary, limit int, v string, set func(*Summary, string)) string {
	set(&s, "")
	room := limit - len(encode(s))
	if room <= 0 {
		return ""
	}
	p, _ := fitString(v, room)
	return p
}

// fitString returns the longest prefix of v, cut at a UTF-8 character
// boundary, whose JSON string encoding (without the quotes) takes at most n
// bytes, and whether it is shorter than v.
func fitString(v string, n int) (string, bool) {
	if quotedLen(v)-2 <= n {
		return v, false
	}
	// Every byte encodes to at least one byte, so no prefix longer than n
	// bytes can fit: search only there.
	hi := min(len(v), n)
	lo := 0
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if quotedLen(v[:boundary(v, mid)])-2 <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return v[:boundary(v, lo)], true
}

// boundary moves i back to the start of the character it falls in, so a
// cut never splits a multi-byte UTF-8 sequence. Invalid bytes count as
// characters of their own.
func boundary(v string, i int) int {
	if i >= len(v) {
		return len(v)
	}
	for j := i; j >= 0 && i-j < utf8.UTFMax; j-- {
		if utf8.RuneStart(v[j]) {
			r, size := utf8.DecodeRuneInString(v[j:])
			if j+size > i && !(r == utf8.RuneError && size == 1) {
				return j // i is inside the character starting at j
			}
			return i
		}
	}
	return i
}

// quotedLen is the length of v encoded as a JSON string, quotes included.
func quotedLen(v string) int {
	b, _ := marshal(v)
	return len(b)
}

func encode(s Summary) []byte {
	b, err := marshal(s)
	if err != nil {
		// Only a NaN or infinite cost can fail; the aggregator never
		// produces one, but a summary must still be written.
		s.Usage = sanitizeTotals(s.Usage)
		b, _ = marshal(s)
	}
	return b
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneString(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneTotals(t events.Totals) events.Totals {
	out := events.Totals{TokenCounts: t.TokenCounts.Clone(), ByModel: make(map[string]events.TokenCounts, len(t.ByModel))}
	for m, c := range t.ByModel {
		out.ByModel[m] = c.Clone()
	}
	return out
}

// sanitizeTotals drops costs that JSON cannot carry (NaN, infinities).
func sanitizeTotals(t events.Totals) events.Totals {
	out := cloneTotals(t)
	out.CostUSD = finite(out.CostUSD)
	for m, c := range out.ByModel {
		c.CostUSD = finite(c.CostUSD)
		out.ByModel[m] = c
	}
	return out
}

func finite(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return nil
	}
	return p
}

// CutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 character, and whether it is shorter than s.
func CutUTF8(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	if n < 0 {
		n = 0
	}
	return s[:boundary(s, n)], true
}
