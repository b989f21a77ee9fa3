// Package mockmodel is a deterministic mock of the Anthropic Messages API,
// and of OpenAI's Responses and Chat Completions APIs (openai.go), for
// running real agent CLIs (claude-code, codex, pi) fully offline in tests.
//
// A conversation picks a scripted scenario with a marker "scenario:NAME" in the
// text of its first user message. The next reply is decided by how many
// assistant turns are already in the conversation, never by the shape of the
// last message. Subagent conversations are recognised by a "subagent:NAME"
// marker that the mock itself puts into the Agent tool's prompt. Requests that
// offer no tools, or carry neither marker, are side calls (the auto-mode
// classifier, title generation, ...) and get short deterministic answers.
//
// claude-code's auto permission mode asks the API for a server-side safety
// verdict on every tool call (request field "safeguards", type
// "dangerous_tool_use"); the mock answers it in message_delta.delta.
// safeguard_results with "not_flagged" for every call, except the call of the
// "denied" scenario, which it flags. Without that answer claude-code refuses
// every call that needs the check (for example Agent).
package mockmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Roles of a model call.
const (
	RoleMain     = "main"
	RoleSubagent = "subagent"
	RoleSide     = "side"
)

// Options configures a Server.
type Options struct {
	// Addr is the listen address; it must be a loopback address. Empty means
	// 127.0.0.1:0 (a free port).
	Addr string
	// RequestLog, if set, receives one JSON line per HTTP request: time,
	// method, path, query, headers (without credentials), how the mock
	// classified it and the request body.
	RequestLog io.Writer
	// SlowInterval and SlowMax control the "slow" scenario: one text delta
	// every SlowInterval (default 500ms) for at most SlowMax (default 120s).
	SlowInterval time.Duration
	SlowMax      time.Duration
	// SubagentDelay delays every reply to the background subagent
	// ("subagent:bg") so that the main agent answers first. Zero means the
	// default of 1s; negative means no delay.
	SubagentDelay time.Duration
	// ReplyDelay delays every main-agent and subagent reply (side calls
	// are answered at once), so that a run stays busy for a while: long
	// enough for a watcher to see it running on a loaded machine.
	ReplyDelay time.Duration
	// NoSafeguards makes the mock ignore the request's "safeguards" (it then
	// behaves like a plain Anthropic-compatible gateway: claude-code's auto
	// mode denies calls that need the server-side check, such as Agent).
	NoSafeguards bool
	// CutStreams drops the connection of the first CutStreams streamed
	// main-agent calls right after message_start, as a failing network
	// or gateway would; the ledger marks them aborted.
	CutStreams int
	// EndStreamsEarly ends the first EndStreamsEarly streamed main-agent
	// calls right after message_start as an answer that ended (the last
	// chunk sent), as a gateway that gives up on a stream may: the client
	// reads a stream without its end and no error. The ledger marks them
	// aborted. Counted after CutStreams.
	EndStreamsEarly int
	// APIKey, when set, is the key every model call must present (as
	// x-api-key or Authorization: Bearer): a call without it is answered
	// 401 and recorded with Call.Key "missing" or "wrong".
	APIKey string
}

// Call is one served model call (POST /v1/messages, /v1/responses or
// /v1/chat/completions).
type Call struct {
	Seq      int    `json:"seq"`      // 1-based, in the order the calls finished
	Scenario string `json:"scenario"` // "" for calls without a scenario
	Role     string `json:"role"`     // "main", "subagent" or "side"
	// Kind is the subagent marker ("fg", "bg") or the side-call kind
	// ("classifier", "title", "other"); "" for the main agent.
	Kind   string `json:"kind,omitempty"`
	Step   int    `json:"step"`  // assistant turns already in the conversation
	Model  string `json:"model"` // the request's "model", which the reply echoes
	Status int    `json:"status"`
	Stream bool   `json:"stream"`
	// Key is how the call presented Options.APIKey: "ok", "wrong" or
	// "missing" ("" when the mock checks none).
	Key string `json:"key,omitempty"`
	// Usage as served: the final values, or for a stream cut before its
	// message_delta the message_start values (output 1); zero for errors.
	// Input is without cache hits whatever the API (see openai.go).
	Usage Usage `json:"usage"`
	// Aborted is true when the client went away before the reply was complete.
	Aborted bool `json:"aborted,omitempty"`
	// API is APIResponses or APIChat; "" for the Anthropic Messages API.
	API string `json:"api,omitempty"`
}

// Server is a running mock model server.
type Server struct {
	opts Options
	srv  *http.Server
	url  string
	reqs atomic.Int64

	mu     sync.Mutex
	ledger []Call
	seen   map[string]int // message id base -> times served
	paths  map[string]int // "METHOD /path" -> count
	cuts   int            // streams cut or ended early so far (Options.CutStreams, EndStreamsEarly)

	logMu   sync.Mutex
	closing chan struct{}
	once    sync.Once
}

// Start listens on opts.Addr (default 127.0.0.1:0) and serves in the background.
func Start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("mockmodel: bad address %q: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("mockmodel: refusing non-loopback address %q", addr)
	}
	if opts.SlowInterval <= 0 {
		opts.SlowInterval = 500 * time.Millisecond
	}
	if opts.SlowMax <= 0 {
		opts.SlowMax = 120 * time.Second
	}
	if opts.SubagentDelay == 0 {
		opts.SubagentDelay = time.Second
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("mockmodel: %w", err)
	}
	s := &Server{
		opts:    opts,
		url:     "http://" + ln.Addr().String(),
		seen:    map[string]int{},
		paths:   map[string]int{},
		closing: make(chan struct{}),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the base URL, e.g. http://127.0.0.1:41234 (use as ANTHROPIC_BASE_URL).
func (s *Server) URL() string { return s.url }

// Close stops the server; streams in progress are cut (and recorded as
// aborted).
func (s *Server) Close() error {
	s.once.Do(func() { close(s.closing) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	return err
}

// Ledger returns a copy of the served model calls, in the order they finished.
func (s *Server) Ledger() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.ledger...)
}

// Paths returns the sorted "METHOD /path count" lines of all requests seen
// (model calls and others), e.g. "POST /v1/messages 7".
func (s *Server) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.paths))
	for k, n := range s.paths {
		out = append(out, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(out)
	return out
}

// Reset clears the ledger, the path counts and the message-id counters.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger = nil
	s.seen = map[string]int{}
	s.paths = map[string]int{}
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Seq = len(s.ledger) + 1
	s.ledger = append(s.ledger, c)
}

// nextID returns a message id that depends only on the conversation state:
// the base, plus "_rN" when the same base was served N times before (a retry).
func (s *Server) nextID(base string) (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.seen[base]
	s.seen[base] = n + 1
	if n == 0 {
		return base, 0
	}
	return fmt.Sprintf("%s_r%d", base, n), n
}

func (s *Server) logRequest(r *http.Request, body []byte, extra map[string]any) {
	if s.opts.RequestLog == nil {
		return
	}
	line := map[string]any{
		"time":   time.Now().UTC().Format(time.RFC3339Nano),
		"method": r.Method,
		"path":   r.URL.Path,
		"query":  r.URL.RawQuery,
	}
	hdr := map[string]string{}
	for k, v := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "X-Api-Key", "Authorization", "Cookie":
			continue
		}
		hdr[k] = strings.Join(v, ", ")
	}
	line["headers"] = hdr
	for k, v := range extra {
		line[k] = v
	}
	if len(body) > 0 {
		if json.Valid(body) {
			line["body"] = json.RawMessage(body)
		} else {
			line["body_text"] = string(body)
		}
	}
	data, err := marshal(line)
	if err != nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = s.opts.RequestLog.Write(append(data, '\n'))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	s.mu.Lock()
	s.paths[r.Method+" "+r.URL.Path]++
	s.mu.Unlock()
	reqID := fmt.Sprintf("req_mock%06d", s.reqs.Add(1))
	w.Header().Set("request-id", reqID)

	const modelsPrefix = "/v1/models/"
	if api, ok := modelAPIs[r.URL.Path]; ok && r.Method == http.MethodPost && s.opts.APIKey != "" {
		if key := s.presentedKey(r); key != "ok" {
			s.logRequest(r, body, map[string]any{"key": key})
			s.record(Call{API: api, Status: http.StatusUnauthorized, Key: key})
			if api == "" {
				writeJSON(w, http.StatusUnauthorized, errorBody("authentication_error", "mockmodel: invalid x-api-key", reqID))
			} else {
				writeJSON(w, http.StatusUnauthorized, openAIError(http.StatusUnauthorized))
			}
			return
		}
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		s.handleMessages(w, r, body, reqID)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		s.handleResponses(w, r, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		s.handleChat(w, r, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		s.logRequest(r, body, nil)
		// A rough, deterministic count: one token per 4 bytes of the body.
		writeJSON(w, http.StatusOK, obj{{"input_tokens", len(body)/4 + 1}})
	case r.Method == http.MethodGet && (r.URL.Path == "/v1/models" || r.URL.Path == "/v1/models/"):
		s.logRequest(r, body, nil)
		ids := []string{"claude-sonnet-5-5", "claude-opus-4-1", "claude-haiku-4-5-20251001"}
		var data []any
		for _, id := range ids {
			data = append(data, modelInfo(id))
		}
		writeJSON(w, http.StatusOK, obj{{"data", data}, {"has_more", false}, {"first_id", ids[0]}, {"last_id", ids[len(ids)-1]}})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, modelsPrefix):
		s.logRequest(r, body, nil)
		writeJSON(w, http.StatusOK, modelInfo(strings.TrimPrefix(r.URL.Path, modelsPrefix)))
	case r.Method == http.MethodHead || r.URL.Path == "/" || r.URL.Path == "/health" || r.URL.Path == "/healthz":
		s.logRequest(r, body, nil)
		writeJSON(w, http.StatusOK, obj{{"ok", true}})
	default:
		s.logRequest(r, body, map[string]any{"unknown_path": true})
		writeJSON(w, http.StatusNotFound, errorBody("not_found_error", "mockmodel: unknown path "+r.URL.Path, reqID))
	}
}

// modelAPIs are the model calls' paths and their Call.API.
var modelAPIs = map[string]string{"/v1/messages": "", "/v1/responses": APIResponses, "/v1/chat/completions": APIChat}

// presentedKey classifies the key a request presents against Options.APIKey.
func (s *Server) presentedKey(r *http.Request) string {
	got := r.Header.Get("X-Api-Key")
	if auth := r.Header.Get("Authorization"); got == "" && auth != "" {
		got = strings.TrimPrefix(auth, "Bearer ")
	}
	switch {
	case got == "":
		return "missing"
	case got != s.opts.APIKey:
		return "wrong"
	}
	return "ok"
}

// keyOf is Call.Key of an accepted call.
func (s *Server) keyOf() string {
	if s.opts.APIKey == "" {
		return ""
	}
	return "ok"
}

func modelInfo(id string) obj {
	return obj{{"type", "model"}, {"id", id}, {"display_name", id}, {"created_at", "2025-01-01T00:00:00Z"}}
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request, body []byte, reqID string) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.logRequest(r, body, map[string]any{"error": err.Error()})
		writeJSON(w, http.StatusBadRequest, errorBody("invalid_request_error", "mockmodel: bad JSON: "+err.Error(), reqID))
		return
	}
	c := classify(&req)
	rep := s.reply(c, &req)
	s.logRequest(r, body, map[string]any{"scenario": c.Scenario, "role": c.Role, "kind": c.Kind, "step": c.Step})

	call := Call{Scenario: c.Scenario, Role: c.Role, Kind: c.Kind, Step: c.Step, Model: req.Model, Stream: req.Stream, Key: s.keyOf()}
	who := c.Kind
	if who == "" {
		who = c.Role
	}
	base := fmt.Sprintf("msg_mock_%s_%s_%d", orNone(c.Scenario), who, c.Step)
	msgID, n := s.nextID(base)
	id := ids{msg: msgID, tool: func(i int) string {
		t := fmt.Sprintf("toolu_mock_%s_%s_%d_%d", orNone(c.Scenario), who, c.Step, i)
		if n > 0 {
			t += fmt.Sprintf("_r%d", n)
		}
		return t
	}}

	if rep.delay > 0 {
		select {
		case <-time.After(rep.delay):
		case <-r.Context().Done():
		case <-s.closing:
		}
	}

	if rep.Status != 0 && rep.Status != http.StatusOK {
		call.Status = rep.Status
		w.Header().Set("x-should-retry", fmt.Sprint(rep.Status >= 500 || rep.Status == http.StatusTooManyRequests))
		writeJSON(w, rep.Status, errorBody(rep.ErrType, rep.ErrMsg, reqID))
		s.record(call)
		return
	}
	call.Status = http.StatusOK
	if !req.Stream {
		call.Usage = rep.Usage
		writeJSON(w, http.StatusOK, rep.message(req.Model, id))
		s.record(call)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	var reset bool
	if c.Role == RoleMain {
		rep.cut, reset = s.takeCut()
	}
	served, complete := rep.stream(ctx, w, req.Model, id, s.opts.SlowInterval, s.opts.SlowMax)
	call.Usage = served
	call.Aborted = !complete
	s.record(call)
	if reset {
		// Not a clean end of the response: the connection is reset.
		panic(http.ErrAbortHandler)
	}
}

// takeCut reports whether this streamed call ends after message_start (one
// of the first Options.CutStreams plus EndStreamsEarly) and whether its
// connection is then reset (one of the first CutStreams).
func (s *Server) takeCut() (cut, reset bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cuts >= s.opts.CutStreams+s.opts.EndStreamsEarly {
		return false, false
	}
	s.cuts++
	return true, s.cuts <= s.opts.CutStreams
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
