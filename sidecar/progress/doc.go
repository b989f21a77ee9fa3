// Package progress is a running agent's live progress: the usage totals and
// counters so far, how many model and tool calls it made, what it is doing
// now, and the filter proxy's own meter, as one small JSON document.
//
// The `events` sidecar of an agent Pod (`agentrun tail --progress-addr`)
// builds the document from the event stream it already follows (Tracker)
// and serves it read-only over HTTP on a Pod port (Server): GET only, with
// long polling (`?after=VERSION`), so a change reaches a waiting reader at
// once and an idle run costs one request per poll timeout. The manager
// reads it (Fetch) for every running run and copies it into the AgentRun's
// status (docs/kubernetes/live-usage.md).
// Nothing in the Pod holds an API credential or writes to the API server.
//
// The document is built from what the agent's CLI printed, which a hostile
// agent can forge, so the reader treats it as untrusted: Fetch bounds its
// size and time and Validate checks every value. It can only ever describe
// the run whose Pod served it.
package progress

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/agentrun-dev/agentrun/events"
)

// Version is the document format version; it goes up only when an existing
// field is removed or changes meaning (fields may be added).
const Version = 1

// Bounds of a valid document. They are far above what a real run reaches
// and keep a forged document from inflating status or overflowing sums.
const (
	// MaxBytes bounds an encoded document: 64 models with long names fit.
	MaxBytes = 64 << 10
	// MaxModels bounds by_model.
	MaxModels = 64
	// MaxModelName bounds a model name.
	MaxModelName = 256
	// MaxActivity bounds the activity line, in bytes.
	MaxActivity = 512
	// MaxTokens bounds any token count (a million calls of a million
	// tokens).
	MaxTokens = int64(1e12)
	// MaxCostUSD bounds any cost.
	MaxCostUSD = 1e9
	// MaxCount bounds calls and counters.
	MaxCount = int64(1 << 30)
)

// Doc is the progress document.
type Doc struct {
	V int `json:"v"`
	// Boot identifies the sidecar process that serves the document: a
	// restarted sidecar replays the event file and counts versions from
	// 1 again.
	Boot string `json:"boot"`
	// Version goes up with every change.
	Version int64 `json:"version"`
	// Usage is the usage so far in the shape of end.usage
	// (docs/events.md, "Usage totals"): the sum of the usage events, and
	// end.usage itself once the end event was written.
	Usage events.Totals `json:"usage"`
	// ByModelCut is true when usage.by_model holds only the MaxModels
	// models with the most tokens (the totals are whole).
	ByModelCut bool `json:"by_model_cut,omitempty"`
	// Counters are the run's tallies so far, as in the end summary.
	Counters events.Counters `json:"counters"`
	// ModelCalls counts usage events (one per model call; one per turn
	// for codex, per step for dsh).
	ModelCalls int64 `json:"model_calls"`
	// ToolCalls counts tool calls started, running ones included.
	ToolCalls int64 `json:"tool_calls"`
	// Activity is the current or last activity as the text format shows
	// it (docs/events.md, "The text format"): a running tool call as the
	// line it will get when it ends, else the line of the latest event
	// the text format shows.
	Activity string `json:"activity"`
	// LastEvent is the time of the latest event (its own time field).
	LastEvent string `json:"last_event,omitempty"`
	// Meter is the filter proxy's count of the model calls to the
	// credential hosts so far (end.meter's numbers), absent without
	// credentials.
	Meter *Meter `json:"meter,omitempty"`
	// Ended is true once the end event was written.
	Ended bool `json:"ended"`
}

// Meter is the proxy's count so far: what the model API itself reported.
type Meter struct {
	Calls            int64 `json:"calls"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// Unmetered counts the calls whose tokens the meter could not count
	// (end.meter.unmetered): the token counts are then a floor.
	Unmetered int64 `json:"unmetered,omitempty"`
}

// Total is every metered token.
func (m Meter) Total() int64 {
	return m.InputTokens + m.OutputTokens + m.CacheReadTokens + m.CacheWriteTokens
}

// Cursor is what a reader has seen: a long poll waits while the document
// still has this boot and version.
type Cursor struct {
	Boot    string
	Version int64
}

// Cursor is the document's position.
func (d *Doc) Cursor() Cursor { return Cursor{Boot: d.Boot, Version: d.Version} }

// LastEventTime is LastEvent parsed; zero when absent.
func (d *Doc) LastEventTime() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, d.LastEvent)
	return t
}

// Validate checks every value of a document read from a Pod.
func (d *Doc) Validate() error {
	if d.V != Version {
		return fmt.Errorf("progress document version %d, want %d", d.V, Version)
	}
	if d.Boot == "" || len(d.Boot) > 64 {
		return errors.New("progress document without a valid boot id")
	}
	if d.Version < 0 {
		return errors.New("negative progress version")
	}
	if err := validCounts("usage", d.Usage.TokenCounts); err != nil {
		return err
	}
	if len(d.Usage.ByModel) > MaxModels {
		return fmt.Errorf("usage.by_model has %d models, at most %d are accepted", len(d.Usage.ByModel), MaxModels)
	}
	for m, c := range d.Usage.ByModel {
		if m == "" || len(m) > MaxModelName || !utf8.ValidString(m) {
			return fmt.Errorf("usage.by_model: invalid model name %q", cut(m, 64))
		}
		if err := validCounts("usage.by_model."+m, c); err != nil {
			return err
		}
	}
	c := d.Counters
	for _, n := range []int{c.Tools, c.ToolErrors, c.Denials, c.Subagents, c.DeniedConnections} {
		if n < 0 || int64(n) > MaxCount {
			return fmt.Errorf("counter %d out of range", n)
		}
	}
	if d.ModelCalls < 0 || d.ModelCalls > MaxCount || d.ToolCalls < 0 || d.ToolCalls > MaxCount {
		return errors.New("model_calls or tool_calls out of range")
	}
	if len(d.Activity) > MaxActivity || !utf8.ValidString(d.Activity) {
		return errors.New("activity too long or not UTF-8")
	}
	if d.LastEvent != "" {
		if _, err := time.Parse(time.RFC3339Nano, d.LastEvent); err != nil {
			return fmt.Errorf("last_event: %w", err)
		}
	}
	if m := d.Meter; m != nil {
		for _, n := range []int64{m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheWriteTokens} {
			if n < 0 || n > MaxTokens {
				return errors.New("meter token count out of range")
			}
		}
		if m.Calls < 0 || m.Calls > MaxCount || m.Unmetered < 0 || m.Unmetered > MaxCount {
			return errors.New("meter calls out of range")
		}
	}
	return nil
}

func validCounts(what string, c events.TokenCounts) error {
	for _, p := range []*int64{c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil && (*p < 0 || *p > MaxTokens) {
			return fmt.Errorf("%s: token count %d out of range", what, *p)
		}
	}
	if f := c.CostUSD; f != nil && (math.IsNaN(*f) || *f < 0 || *f > MaxCostUSD) {
		return fmt.Errorf("%s: cost out of range", what)
	}
	return nil
}

// cut shortens s to at most n bytes without splitting a character, marking
// the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
