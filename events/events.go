// Package events is the schema-1 unified event stream of docs/events.md: the
// ten event types, their fields in the documented order, and the
// null-versus-value rules. Every other part of agentrun produces or
// consumes these types; nothing else defines the schema.
//
// Field order matters (consumers diff streams line by line), so every event is
// a struct whose fields are declared in the documented order and encoding/json keeps
// that order. Optional values are pointers without omitempty so that "the
// runtime did not report it" is written as null, never left out.
package events

import "time"

// Schema is the version of the event format; it goes up only when an existing
// field is removed or changes meaning.
const Schema = 1

// Event types.
const (
	TypeStart         = "start"
	TypePrompt        = "prompt"
	TypeToolStart     = "tool_start"
	TypeTool          = "tool"
	TypeText          = "text"
	TypeUsage         = "usage"
	TypeSubagentStart = "subagent_start"
	TypeSubagentEnd   = "subagent_end"
	TypeNetwork       = "network"
	TypeEnd           = "end"
)

// End statuses, in the precedence order of docs/events.md, "The end status"
// (first that holds wins).
const (
	StatusRejected    = "rejected"
	StatusTimeout     = "timeout"
	StatusLimit       = "limit"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
	StatusFinished    = "finished"
)

// Subagent end statuses.
const (
	SubagentFinished = "finished"
	SubagentFailed   = "failed"
)

// Network denial reasons (docs/events.md, "network"). Schema 1 may gain
// reasons: a consumer treats one it does not know as a refusal.
const (
	ReasonNotAllowed     = "not_allowed"
	ReasonPrivateAddress = "private_address"
	// ReasonUnresolvable: the name passed the policy but has no address;
	// nothing was dialed.
	ReasonUnresolvable = "unresolvable"
	// ReasonConnectionLimit: the run's proxy connection cap was reached
	// and every connection was busy.
	ReasonConnectionLimit = "connection_limit"
	// ReasonUnsupportedEncoding: a credential destination answered in a
	// content encoding the proxy cannot read, so it could neither take the
	// real value out nor meter the call; the answer was refused (502).
	ReasonUnsupportedEncoding = "unsupported_encoding"
	// ReasonTLSRequired: a plain-HTTP request to a credential destination
	// that was not declared as speaking plain HTTP; the real value goes
	// over TLS only, so the request was refused (403).
	ReasonTLSRequired = "tls_required"
	// ReasonUnmetered: with --max-tokens, a request to a credential
	// destination whose tokens the meter cannot count (not a model call of
	// an API it reads, nor one known to generate nothing); the request was
	// refused before it went upstream (403).
	ReasonUnmetered = "unmetered"
	// ReasonGitPush: a push to the run's repository; agentrun publishes the
	// change itself once the agent has exited (docs/git.md), so the agent
	// never pushes (403).
	ReasonGitPush = "git_push"
	// ReasonGitScope: a request to the run's git host that is not a fetch
	// of the run's repository, carrying the git credential's stand-in or
	// to a host the network policy allows only for that fetch (403).
	ReasonGitScope = "git_scope"
	// ReasonCredentialAddress: a request under another name, or as an IP
	// address, to an address and port of a credential destination or of
	// the run's repository, which are reached only by their own name,
	// through the proxy's interceptor (403).
	ReasonCredentialAddress = "credential_address"
)

// TimeFormat is RFC 3339 in UTC with exactly three fractional digits.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime renders t as an event's time (docs/events.md, "Common fields").
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Base is the head every event starts with.
type Base struct {
	Schema int    `json:"schema"`
	Type   string `json:"type"`
	Time   string `json:"time"`
}

// Event is implemented by every schema-1 event.
type Event interface {
	base() *Base
}

func (b *Base) base() *Base { return b }

// Head returns the common fields of e.
func Head(e Event) *Base { return e.base() }

// Stamp sets the schema, type and time of e.
func Stamp(e Event, typ string, t time.Time) {
	b := e.base()
	b.Schema = Schema
	b.Type = typ
	b.Time = FormatTime(t)
}

// Stamper is Stamp for a stream of events: it keeps the text of the last
// time it formatted and gives it again to every event of the same
// millisecond, which is what FormatTime would give (it truncates to the
// millisecond). A run's events come many to a millisecond, and formatting
// each event's time was a tenth of translate's work on codex's short lines
// (docs/benchmarks.md, "Translate"). The zero Stamper is ready to use.
type Stamper struct {
	ms   int64 // the millisecond of text, since the Unix epoch
	text string
}

// Stamp sets the schema, type and time of e.
func (s *Stamper) Stamp(e Event, typ string, t time.Time) {
	if ms := t.UnixMilli(); ms != s.ms || s.text == "" {
		s.ms, s.text = ms, FormatTime(t)
	}
	b := e.base()
	b.Schema = Schema
	b.Type = typ
	b.Time = s.text
}

// Network describes the network policy of a run.
type Network struct {
	Mode     string   `json:"mode"`
	Allow    []string `json:"allow"`
	Enforced bool     `json:"enforced"`
}

// Start is written once, after the runtime process started.
type Start struct {
	Base
	Runtime  string   `json:"runtime"`
	Sandbox  string   `json:"sandbox"`
	Network  Network  `json:"network"`
	DenyRead []string `json:"deny_read"`
	Model    *string  `json:"model"`
	Cwd      string   `json:"cwd"`
	Argv     []string `json:"argv"`
	Env      []string `json:"env"`
	// Credentials names the variables the agent holds only a stand-in for
	// (--credential); absent when there are none.
	Credentials []string `json:"credentials,omitempty"`
	// TraceID is the run's OpenTelemetry trace id (docs/telemetry.md);
	// absent when the run exports no telemetry.
	TraceID string `json:"trace_id,omitempty"`
}

// Prompt carries the prompt the runtime received.
type Prompt struct {
	Base
	Text   string   `json:"text"`
	Images []string `json:"images"`
}

// ToolStart is written when a tool call starts.
type ToolStart struct {
	Base
	ID      string  `json:"id"`
	Parent  *string `json:"parent"`
	Name    string  `json:"name"`
	Summary string  `json:"summary"`
}

// Tool is written when a tool call ends.
type Tool struct {
	Base
	ID      string  `json:"id"`
	Parent  *string `json:"parent"`
	Name    string  `json:"name"`
	Summary string  `json:"summary"`
	Denied  bool    `json:"denied"`
	Error   *bool   `json:"error"`
}

// Text is a complete piece of agent text.
type Text struct {
	Base
	Parent *string `json:"parent"`
	Text   string  `json:"text"`
}

// Usage is the usage of one model call (or one turn or step, per runtime).
type Usage struct {
	Base
	Parent           *string  `json:"parent"`
	Model            *string  `json:"model"`
	InputTokens      *int64   `json:"input_tokens"`
	OutputTokens     *int64   `json:"output_tokens"`
	CacheReadTokens  *int64   `json:"cache_read_tokens"`
	CacheWriteTokens *int64   `json:"cache_write_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	ContextTokens    *int64   `json:"context_tokens"`
}

// SubagentStart is written when an agent starts a subagent.
type SubagentStart struct {
	Base
	ID          string  `json:"id"`
	Parent      *string `json:"parent"`
	Number      int     `json:"number"`
	Kind        string  `json:"kind"`
	Model       *string `json:"model"`
	Description string  `json:"description"`
}

// SubagentEnd is written when a subagent ends.
type SubagentEnd struct {
	Base
	ID         string `json:"id"`
	Status     string `json:"status"`
	DurationMs int64  `json:"duration_ms"`
	Usage      Totals `json:"usage"`
}

// NetworkAccess is one (host, port, allowed) decision of the filter proxy.
type NetworkAccess struct {
	Base
	Host    string  `json:"host"`
	Port    int     `json:"port"`
	Allowed bool    `json:"allowed"`
	Reason  *string `json:"reason"`
	// Suppressed is absent on a decision reported on its own; on a
	// summary (the proxy reported its cap of distinct decisions of this
	// kind) it counts the decisions of the kind not reported one by one
	// since the previous summary, this one included.
	Suppressed int `json:"suppressed,omitempty"`
}

// End is the last event of every run.
type End struct {
	Base
	Status     string  `json:"status"`
	ExitCode   *int    `json:"exit_code"`
	Detail     string  `json:"detail"`
	DurationMs int64   `json:"duration_ms"`
	Usage      Totals  `json:"usage"`
	Result     *string `json:"result"`
	SessionID  *string `json:"session_id"`
	// Meter is what the filter proxy counted of the model calls to the
	// credential destinations, from the API's own responses; absent when
	// the run has no credentials.
	Meter *Meter `json:"meter,omitempty"`
	// Git is the run's repository and what the agent changed in it;
	// absent without --repo.
	Git *Git `json:"git,omitempty"`
}

// Git is end.git: the repository the run cloned, the change the agent
// made, and where agentrun published it (docs/git.md).
type Git struct {
	Repository string `json:"repository"`
	// Ref is the ref the run started from (refs/heads/main, refs/tags/v1,
	// or a commit id); BaseCommit the commit it named.
	Ref        string `json:"ref"`
	BaseCommit string `json:"base_commit"`
	// HeadCommit holds the whole change (the base commit when nothing
	// changed).
	HeadCommit string `json:"head_commit"`
	// Branch is the run's branch (push branch), null otherwise; Pushed
	// whether the change is on it.
	Branch *string `json:"branch"`
	Pushed bool    `json:"pushed"`
	// Patch is the patch file (push patch), null otherwise or when nothing
	// changed.
	Patch *string `json:"patch"`
	// Commits counts base..head: the agent's and agentrun's one for what
	// was left uncommitted.
	Commits      int `json:"commits"`
	FilesChanged int `json:"files_changed"`
	Insertions   int `json:"insertions"`
	Deletions    int `json:"deletions"`
	// Paths are the first changed paths (at most 20), control characters
	// escaped.
	Paths []string `json:"paths"`
	// Detail says what was not recorded or not published, and why; "" when
	// everything was.
	Detail string `json:"detail"`
}

// Meter is end.meter: the metered calls and tokens (never null: a call the
// API reported nothing for counts 0), and whether they equal end.usage.
type Meter struct {
	Calls            int   `json:"calls"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// Matches is true when every call was metered and each count equals
	// end.usage's (null there counting as 0): the CLI reported what the
	// API did.
	Matches bool `json:"matches"`
	// Unmetered counts the calls whose tokens the meter could not count
	// (absent when none): a model call answered without usage or with more
	// than the meter reads, an answer in an encoding the proxy refused, a
	// successful call of a kind the meter does not read. Matches is false
	// when there is one.
	Unmetered int `json:"unmetered,omitempty"`
}

// TokenCounts are the five summable usage fields.
type TokenCounts struct {
	InputTokens      *int64   `json:"input_tokens"`
	OutputTokens     *int64   `json:"output_tokens"`
	CacheReadTokens  *int64   `json:"cache_read_tokens"`
	CacheWriteTokens *int64   `json:"cache_write_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
}

// Totals is a usage total with a per-model breakdown. ByModel is never nil
// when written: a run without any usage has {} there.
type Totals struct {
	TokenCounts
	ByModel map[string]TokenCounts `json:"by_model"`
}

// UnknownModel is the by_model key for usage whose model is not known.
const UnknownModel = "unknown"
