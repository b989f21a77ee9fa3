package mockmodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	Name string
	Data map[string]any
	Raw  string
}

func parseSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name, data string
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if lines != 2 {
				t.Fatalf("event %q has %d lines, want event+data", name, lines)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: bad JSON %q: %v", name, data, err)
			}
			out = append(out, sseEvent{Name: name, Data: m, Raw: data})
			name, data, lines = "", "", 0
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
			lines++
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
			lines++
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if lines != 0 {
		t.Fatalf("stream ends inside an event")
	}
	return out
}

// req builds a Messages API request body.
type req struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []any  `json:"messages"`
	Tools    []any  `json:"tools,omitempty"`
	System   any    `json:"system,omitempty"`
	Stop     []any  `json:"stop_sequences,omitempty"`
	Safe     []any  `json:"safeguards,omitempty"`
}

var agentTools = []any{map[string]any{"name": "Bash"}, map[string]any{"name": "Agent"}, map[string]any{"name": "Read"}}

var autoSafeguards = []any{map[string]any{"type": "dangerous_tool_use", "classifier_context": map[string]any{"v": 1}}}

func userText(texts ...string) map[string]any {
	var blocks []any
	for _, s := range texts {
		blocks = append(blocks, map[string]any{"type": "text", "text": s})
	}
	return map[string]any{"role": "user", "content": blocks}
}

func assistantTool(id, name string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}}}
}

func assistantText(s string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": s}}}
}

func toolResult(id string, extra ...string) map[string]any {
	blocks := []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}
	for _, s := range extra {
		blocks = append(blocks, map[string]any{"type": "text", "text": s})
	}
	return map[string]any{"role": "user", "content": blocks}
}

const reminder = "<system-reminder>\nsome context the CLI prepends\n</system-reminder>\n"

func post(t *testing.T, s *Server, body any) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.URL()+"/v1/messages?beta=true", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func streamEvents(t *testing.T, s *Server, body req) []sseEvent {
	t.Helper()
	body.Stream = true
	resp := post(t, s, body)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	return parseSSE(t, resp.Body)
}

// blocksOf reassembles the content blocks of a stream.
func blocksOf(t *testing.T, evs []sseEvent) []map[string]any {
	t.Helper()
	var out []map[string]any
	partial := map[int]string{}
	for _, ev := range evs {
		switch ev.Name {
		case "content_block_start":
			out = append(out, ev.Data["content_block"].(map[string]any))
		case "content_block_delta":
			i := int(ev.Data["index"].(float64))
			d := ev.Data["delta"].(map[string]any)
			b := out[i]
			switch d["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + d["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + d["thinking"].(string)
			case "signature_delta":
				b["signature"] = d["signature"]
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			}
		case "content_block_stop":
			i := int(ev.Data["index"].(float64))
			if js, ok := partial[i]; ok {
				var in map[string]any
				if err := json.Unmarshal([]byte(js), &in); err != nil {
					t.Fatalf("tool input %q: %v", js, err)
				}
				out[i]["input"] = in
			}
		}
	}
	return out
}

func TestStartAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"127.0.0.1:0", true},
		{"localhost:0", true},
		{"0.0.0.0:0", false},
		{":0", false},
		{"192.0.2.1:0", false},
		{"example.com:0", false},
		{"127.0.0.1", false},
	} {
		s, err := Start(Options{Addr: tc.addr})
		if (err == nil) != tc.ok {
			t.Errorf("Start(%q) error = %v, want ok=%v", tc.addr, err, tc.ok)
		}
		if s != nil {
			if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
				t.Errorf("URL() = %q", s.URL())
			}
			s.Close()
		}
	}
}

func TestSSEFraming(t *testing.T) {
	s := startServer(t, Options{})
	evs := streamEvents(t, s, req{Model: "claude-sonnet-5-5", Tools: agentTools, Safe: autoSafeguards,
		Messages: []any{userText(reminder, "scenario:parallel go")}})

	var names []string
	for _, ev := range evs {
		names = append(names, ev.Name)
		if ev.Data["type"] != ev.Name {
			t.Errorf("event %q carries type %v", ev.Name, ev.Data["type"])
		}
		if !strings.HasPrefix(ev.Raw, `{"type":"`+ev.Name+`"`) {
			t.Errorf("data does not start with its type: %s", ev.Raw)
		}
	}
	want := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", // thinking: 2 deltas + signature
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", // text
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", // Bash ls: "" + 3 pieces
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", // Bash echo two
		"message_delta", "message_stop"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("events:\n got %v\nwant %v", names, want)
	}

	start := evs[0].Data["message"].(map[string]any)
	if start["model"] != "claude-sonnet-5-5" || start["id"] != "msg_mock_parallel_main_0" || start["stop_reason"] != nil {
		t.Errorf("message_start = %v", start)
	}
	u := start["usage"].(map[string]any)
	if u["output_tokens"] != 1.0 || u["input_tokens"] != 10.0 || u["cache_creation_input_tokens"] != 100.0 || u["cache_read_input_tokens"] != 0.0 {
		t.Errorf("message_start usage = %v", u)
	}
	md := evs[len(evs)-2].Data
	if d := md["delta"].(map[string]any); d["stop_reason"] != "tool_use" {
		t.Errorf("message_delta.delta = %v", d)
	}
	fu := md["usage"].(map[string]any)
	if fu["output_tokens"] != 20.0 || fu["input_tokens"] != 10.0 || fu["cache_creation_input_tokens"] != 100.0 {
		t.Errorf("message_delta usage = %v", fu)
	}

	blocks := blocksOf(t, evs)
	if len(blocks) != 4 {
		t.Fatalf("blocks = %v", blocks)
	}
	if blocks[0]["type"] != "thinking" || blocks[0]["thinking"] == "" || blocks[0]["signature"] == "" {
		t.Errorf("thinking block = %v", blocks[0])
	}
	if blocks[1]["type"] != "text" || blocks[1]["text"] != "Running two commands in parallel." {
		t.Errorf("text block = %v", blocks[1])
	}
	for i, cmd := range map[int]string{2: "ls", 3: "echo two"} {
		b := blocks[i]
		if b["type"] != "tool_use" || b["name"] != "Bash" || b["input"].(map[string]any)["command"] != cmd || !strings.HasPrefix(b["id"].(string), "toolu_") {
			t.Errorf("block %d = %v", i, b)
		}
	}
	// The first input_json_delta is empty, like the real API's.
	if d := evs[13].Data["delta"].(map[string]any); d["type"] != "input_json_delta" || d["partial_json"] != "" {
		t.Errorf("first input_json_delta = %v", d)
	}
	// The verdict of the server-side safety check covers both calls.
	sg := md["delta"].(map[string]any)["safeguard_results"].([]any)[0].(map[string]any)
	uses := sg["status"].(map[string]any)["tool_uses"].(map[string]any)
	if sg["type"] != "dangerous_tool_use" || len(uses) != 2 {
		t.Errorf("safeguard_results = %v", sg)
	}
	for id, v := range uses {
		if v.(map[string]any)["outcome"] != "not_flagged" {
			t.Errorf("tool %s verdict %v", id, v)
		}
	}
}

func TestScenarioSelection(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		body                   req
		scenario, role, kind   string
		firstBlockType, detail string
	}{
		{
			name:     "marker after system reminder",
			body:     req{Tools: agentTools, Messages: []any{userText(reminder, "please scenario:tool now")}},
			scenario: "tool", role: RoleMain, firstBlockType: "tool_use", detail: "Bash",
		},
		{
			name:     "string content",
			body:     req{Tools: agentTools, Messages: []any{map[string]any{"role": "user", "content": "scenario:subagent"}}},
			scenario: "subagent", role: RoleMain, firstBlockType: "text", detail: "Delegating to a subagent.",
		},
		{
			name:     "marker only in a later message does not count",
			body:     req{Tools: agentTools, Messages: []any{userText("hello"), assistantText("hi"), userText("scenario:tool")}},
			scenario: "", role: RoleSide, kind: SideOther, firstBlockType: "text", detail: "OK",
		},
		{
			name:     "subagent marker",
			body:     req{Tools: agentTools, Messages: []any{userText(reminder, "subagent:fg Run echo sub")}},
			scenario: "subagent", role: RoleSubagent, kind: "fg", firstBlockType: "tool_use", detail: "Bash",
		},
		{
			name:     "background subagent marker",
			body:     req{Tools: agentTools, Messages: []any{userText("subagent:bg Run echo sub")}},
			scenario: "background", role: RoleSubagent, kind: "bg", firstBlockType: "tool_use", detail: "Bash",
		},
		{
			name: "classifier quoting the transcript is a side call",
			body: req{System: "You are a security monitor for autonomous AI coding agents.", Stop: []any{"</severity>"},
				Messages: []any{userText("<transcript>\n{\"user\":\"scenario:tool\"}\n</transcript>")}},
			scenario: "", role: RoleSide, kind: SideClassifier, firstBlockType: "text", detail: "<severity>2",
		},
		{
			name:     "no marker",
			body:     req{Messages: []any{userText("Generate a title for this conversation")}, System: "Write a short title"},
			scenario: "", role: RoleSide, kind: SideTitle, firstBlockType: "text", detail: "Mock session",
		},
		{
			name:     "unknown scenario",
			body:     req{Tools: agentTools, Messages: []any{userText("scenario:nope")}},
			scenario: "nope", role: RoleMain, firstBlockType: "text", detail: `mockmodel: unknown scenario "nope"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, Options{})
			tc.body.Model = "claude-test"
			blocks := blocksOf(t, streamEvents(t, s, tc.body))
			b := blocks[0]
			if b["type"] != tc.firstBlockType {
				t.Fatalf("first block = %v", b)
			}
			got := b["text"]
			if b["type"] == "tool_use" {
				got = b["name"]
			}
			if got != tc.detail {
				t.Errorf("first block detail = %v, want %q", got, tc.detail)
			}
			l := s.Ledger()
			if len(l) != 1 {
				t.Fatalf("ledger = %v", l)
			}
			if l[0].Scenario != tc.scenario || l[0].Role != tc.role || l[0].Kind != tc.kind || l[0].Model != "claude-test" {
				t.Errorf("call = %+v, want scenario %q role %q kind %q", l[0], tc.scenario, tc.role, tc.kind)
			}
		})
	}
}

func TestNextReplyFromState(t *testing.T) {
	first := userText(reminder, "scenario:background go")
	for _, tc := range []struct {
		name     string
		scenario string
		messages []any
		step     int
		want     string // text of the first text block, or tool name
	}{
		{"tool step 0", "tool", []any{userText("scenario:tool")}, 0, "Bash"},
		{"tool result followed by reminder text", "tool", []any{userText("scenario:tool"), assistantTool("t1", "Bash"), toolResult("t1", reminder)}, 1, "Done: wrote hello.txt"},
		{"last message is plain text, not a tool result", "tool", []any{userText("scenario:tool"), assistantTool("t1", "Bash"), toolResult("t1"), userText(reminder)}, 1, "Done: wrote hello.txt"},
		{"after the script ends it repeats the last reply", "tool", []any{userText("scenario:tool"), assistantTool("t1", "Bash"), toolResult("t1"), assistantText("Done"), userText("again")}, 2, "Done: wrote hello.txt"},
		{"background launch", "background", []any{first}, 0, "Delegating to a subagent."},
		{"background answers while the subagent runs", "background", []any{first, assistantTool("a", "Agent"), toolResult("a")}, 1, "Subagent launched in the background; waiting for its result."},
		{"background notification turn", "background", []any{first, assistantTool("a", "Agent"), toolResult("a"), assistantText("launched"), userText("<task-notification>done</task-notification>")}, 2, "Background result received"},
		{"foreground after subagent", "subagent", []any{userText("scenario:subagent"), assistantTool("a", "Agent"), toolResult("a", reminder)}, 1, "Main done after subagent"},
		{"denied final text", "denied", []any{userText("scenario:denied"), assistantTool("d", "Bash"), toolResult("d")}, 1, "The command was denied; stopping here."},
		{"probe answers with the command's output", "probe", []any{userText("scenario:probe probe<<<id -u>>>"), assistantTool("p", "Bash"), toolResult("p", reminder)}, 1, ProbeAnswerPrefix + "ok"},
		{"probe without a command says so", "probe", []any{userText("scenario:probe")}, 0, "mockmodel: the probe scenario needs probe<<<COMMAND>>> in the prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, Options{})
			blocks := blocksOf(t, streamEvents(t, s, req{Model: "m", Tools: agentTools, Messages: tc.messages}))
			got := blocks[0]["text"]
			if blocks[0]["type"] == "tool_use" {
				got = blocks[0]["name"]
			}
			if got != tc.want {
				t.Errorf("reply = %v, want %q", got, tc.want)
			}
			if c := s.Ledger()[0]; c.Step != tc.step || c.Scenario != tc.scenario {
				t.Errorf("call = %+v, want step %d", c, tc.step)
			}
		})
	}
}

// TestProbeCommand: the probe scenario runs exactly the prompt's command,
// which may span lines and follow a system reminder.
func TestProbeCommand(t *testing.T) {
	s := startServer(t, Options{})
	blocks := blocksOf(t, streamEvents(t, s, req{Model: "m", Tools: agentTools,
		Messages: []any{userText(reminder, "scenario:probe probe<<<\nid -u\ncat /etc/hostname\n>>> thanks")}}))
	input, _ := blocks[0]["input"].(map[string]any)
	if blocks[0]["name"] != "Bash" || input["command"] != "id -u\ncat /etc/hostname" {
		t.Errorf("probe call %v", blocks[0])
	}
}

func TestSubagentScript(t *testing.T) {
	s := startServer(t, Options{SubagentDelay: -1})
	tools := append([]any{map[string]any{"name": "SubagentHandback"}}, agentTools...)
	first := userText("subagent:fg Run echo sub")
	steps := []struct {
		msgs []any
		want string
	}{
		{[]any{first}, "Bash"},
		{[]any{first, assistantTool("b", "Bash"), toolResult("b")}, "SubagentHandback"},
		{[]any{first, assistantTool("b", "Bash"), toolResult("b"), assistantTool("h", "SubagentHandback"), toolResult("h")}, "sub report"},
	}
	for i, st := range steps {
		blocks := blocksOf(t, streamEvents(t, s, req{Model: "m", Tools: tools, Messages: st.msgs}))
		got := blocks[0]["text"]
		if blocks[0]["type"] == "tool_use" {
			got = blocks[0]["name"]
		}
		if got != st.want {
			t.Errorf("step %d: %v, want %q", i, got, st.want)
		}
		if i == 1 && blocks[0]["input"].(map[string]any)["message"] != "sub report" {
			t.Errorf("handback input = %v", blocks[0]["input"])
		}
	}
	// Without a SubagentHandback tool the report is plain text.
	blocks := blocksOf(t, streamEvents(t, s, req{Model: "m", Tools: agentTools, Messages: steps[1].msgs}))
	if blocks[0]["text"] != "sub report" {
		t.Errorf("reply without handback tool = %v", blocks[0])
	}
	for _, c := range s.Ledger() {
		if c.Role != RoleSubagent || c.Kind != "fg" || c.Scenario != "subagent" {
			t.Errorf("call = %+v", c)
		}
	}
}

func TestLedgerAndUsage(t *testing.T) {
	s := startServer(t, Options{})
	msgs := []any{userText("scenario:tool")}
	streamEvents(t, s, req{Model: "claude-sonnet-5-5", Tools: agentTools, Messages: msgs})
	msgs = append(msgs, assistantTool("t", "Bash"), toolResult("t"))
	streamEvents(t, s, req{Model: "claude-sonnet-5-5", Tools: agentTools, Messages: msgs})
	streamEvents(t, s, req{Model: "claude-sonnet-5-5", Tools: agentTools, Messages: []any{userText("subagent:fg x")}})
	streamEvents(t, s, req{Model: "claude-haiku", Messages: []any{userText("hello")}})
	// A retry of step 0 gets a distinct message id.
	evs := streamEvents(t, s, req{Model: "claude-sonnet-5-5", Tools: agentTools, Messages: msgs[:1]})
	if id := evs[0].Data["message"].(map[string]any)["id"]; id != "msg_mock_tool_main_0_r1" {
		t.Errorf("retried message id = %v", id)
	}

	want := []Call{
		{Seq: 1, Scenario: "tool", Role: RoleMain, Step: 0, Model: "claude-sonnet-5-5", Status: 200, Stream: true, Usage: Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 0, CacheWriteTokens: 100}},
		{Seq: 2, Scenario: "tool", Role: RoleMain, Step: 1, Model: "claude-sonnet-5-5", Status: 200, Stream: true, Usage: Usage{InputTokens: 11, OutputTokens: 25, CacheReadTokens: 1000, CacheWriteTokens: 200}},
		{Seq: 3, Scenario: "subagent", Role: RoleSubagent, Kind: "fg", Step: 0, Model: "claude-sonnet-5-5", Status: 200, Stream: true, Usage: Usage{InputTokens: 40, OutputTokens: 60, CacheReadTokens: 2000, CacheWriteTokens: 50}},
		{Seq: 4, Scenario: "", Role: RoleSide, Kind: SideOther, Step: 0, Model: "claude-haiku", Status: 200, Stream: true, Usage: Usage{InputTokens: 500, OutputTokens: 5}},
		{Seq: 5, Scenario: "tool", Role: RoleMain, Step: 0, Model: "claude-sonnet-5-5", Status: 200, Stream: true, Usage: Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 0, CacheWriteTokens: 100}},
	}
	got := s.Ledger()
	if len(got) != len(want) {
		t.Fatalf("ledger has %d calls: %+v", len(got), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	got[0].Scenario = "changed"
	if s.Ledger()[0].Scenario != "tool" {
		t.Error("Ledger does not return a copy")
	}
	if p := s.Paths(); len(p) != 1 || p[0] != "POST /v1/messages 5" {
		t.Errorf("Paths = %v", p)
	}
	s.Reset()
	if len(s.Ledger()) != 0 || len(s.Paths()) != 0 {
		t.Error("Reset left calls")
	}
	evs = streamEvents(t, s, req{Model: "m", Tools: agentTools, Messages: msgs[:1]})
	if id := evs[0].Data["message"].(map[string]any)["id"]; id != "msg_mock_tool_main_0" {
		t.Errorf("message id after Reset = %v", id)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		status   int
		errType  string
	}{
		{"error401", 401, "authentication_error"},
		{"error500", 500, "api_error"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			s := startServer(t, Options{})
			resp := post(t, s, req{Model: "m", Stream: true, Tools: agentTools, Messages: []any{userText("scenario:" + tc.scenario)}})
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("request-id") == "" {
				t.Errorf("headers = %v", resp.Header)
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Type != "error" || body.Error.Type != tc.errType || body.Error.Message == "" {
				t.Errorf("body = %+v", body)
			}
			if c := s.Ledger()[0]; c.Status != tc.status || c.Usage != (Usage{}) || c.Scenario != tc.scenario {
				t.Errorf("call = %+v", c)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	s := startServer(t, Options{})
	resp := post(t, s, req{Model: "claude-x", Tools: agentTools, Safe: autoSafeguards, Messages: []any{userText("scenario:denied")}})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var m struct {
		ID         string           `json:"id"`
		Type       string           `json:"type"`
		Role       string           `json:"role"`
		Model      string           `json:"model"`
		StopReason string           `json:"stop_reason"`
		Content    []map[string]any `json:"content"`
		Usage      map[string]any   `json:"usage"`
		Safeguards []struct {
			Status struct {
				ToolUses map[string]map[string]any `json:"tool_uses"`
			} `json:"status"`
		} `json:"safeguard_results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.Role != "assistant" || m.Model != "claude-x" || m.StopReason != "tool_use" || len(m.Content) != 1 {
		t.Fatalf("message = %+v", m)
	}
	if m.Content[0]["input"].(map[string]any)["command"] != deniedCommand {
		t.Errorf("content = %v", m.Content)
	}
	if m.Usage["output_tokens"] != 20.0 || m.Usage["input_tokens"] != 10.0 {
		t.Errorf("usage = %v", m.Usage)
	}
	v := m.Safeguards[0].Status.ToolUses[m.Content[0]["id"].(string)]
	if v["outcome"] != "flagged" || v["explanation"] == "" {
		t.Errorf("verdict = %v", v)
	}
	if c := s.Ledger()[0]; c.Stream || c.Usage.OutputTokens != 20 {
		t.Errorf("call = %+v", c)
	}
}

func TestSafeguards(t *testing.T) {
	outcome := func(t *testing.T, evs []sseEvent) string {
		d := evs[len(evs)-2].Data["delta"].(map[string]any)
		sg, ok := d["safeguard_results"].([]any)
		if !ok {
			return "none"
		}
		for _, v := range sg[0].(map[string]any)["status"].(map[string]any)["tool_uses"].(map[string]any) {
			return v.(map[string]any)["outcome"].(string)
		}
		return "empty"
	}
	for _, tc := range []struct {
		name     string
		opts     Options
		scenario string
		safe     []any
		want     string
	}{
		{"allowed", Options{}, "tool", autoSafeguards, "not_flagged"},
		{"denied is flagged", Options{}, "denied", autoSafeguards, "flagged"},
		{"not asked for", Options{}, "tool", nil, "none"},
		{"switched off", Options{NoSafeguards: true}, "tool", autoSafeguards, "none"},
		{"no tool calls", Options{}, "error-free text", autoSafeguards, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.opts)
			evs := streamEvents(t, s, req{Model: "m", Tools: agentTools, Safe: tc.safe, Messages: []any{userText("scenario:" + tc.scenario)}})
			if got := outcome(t, evs); got != tc.want {
				t.Errorf("verdict = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestClassifier(t *testing.T) {
	sys := "You are a security monitor for autonomous AI coding agents."
	for _, tc := range []struct {
		name       string
		stop       []any
		transcript string
		want       string
		stopReason string
	}{
		{"stage 1 allows", []any{"</severity>"}, `{"Bash":"echo hello"}`, "<severity>2", "stop_sequence"},
		{"stage 2 allows", nil, `{"Bash":"echo hello"}`, "<thinking>mockmodel verdict.</thinking>\n<severity>2</severity>", "end_turn"},
		{"stage 1 blocks the denied command", []any{"</severity>"}, `{"Bash":"` + deniedCommand + `"}`, "<severity>95", "stop_sequence"},
		{"stage 2 blocks the denied command", nil, `{"Bash":"` + deniedCommand + `"}`, "<thinking>mockmodel verdict.</thinking>\n<severity>95</severity><category>Irreversible Local Destruction</category>", "end_turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, Options{})
			resp := post(t, s, req{Model: "claude-sonnet-5", System: []any{map[string]any{"type": "text", "text": sys}}, Stop: tc.stop,
				Messages: []any{userText("<transcript>\n", tc.transcript, "</transcript>\n")}})
			var m struct {
				Content      []map[string]any `json:"content"`
				StopReason   string           `json:"stop_reason"`
				StopSequence *string          `json:"stop_sequence"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatal(err)
			}
			if m.Content[0]["text"] != tc.want || m.StopReason != tc.stopReason {
				t.Errorf("reply = %q (%s), want %q (%s)", m.Content[0]["text"], m.StopReason, tc.want, tc.stopReason)
			}
			if (m.StopSequence != nil) != (tc.stopReason == "stop_sequence") {
				t.Errorf("stop_sequence = %v", m.StopSequence)
			}
			if c := s.Ledger()[0]; c.Role != RoleSide || c.Kind != SideClassifier || c.Usage.InputTokens != 800 {
				t.Errorf("call = %+v", c)
			}
		})
	}
}

func TestSlowStopsWhenClientGoesAway(t *testing.T) {
	s := startServer(t, Options{SlowInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data, _ := json.Marshal(req{Model: "m", Stream: true, Tools: agentTools, Messages: []any{userText("scenario:slow")}})
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/messages", bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	deltas := 0
	for sc.Scan() && deltas < 5 {
		if strings.Contains(sc.Text(), `"text_delta"`) {
			deltas++
		}
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Ledger()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	l := s.Ledger()
	if len(l) != 1 || !l[0].Aborted || l[0].Usage.OutputTokens != 1 || l[0].Usage.InputTokens != 10 {
		t.Fatalf("ledger = %+v", l)
	}
}

func TestSlowRunsToItsMaximum(t *testing.T) {
	s := startServer(t, Options{SlowInterval: 5 * time.Millisecond, SlowMax: 50 * time.Millisecond})
	evs := streamEvents(t, s, req{Model: "m", Tools: agentTools, Messages: []any{userText("scenario:slow")}})
	text := blocksOf(t, evs)[0]["text"].(string)
	if n := strings.Count(text, "slow "); n < 3 || n > 11 {
		t.Errorf("%d chunks in %q", n, text)
	}
	if c := s.Ledger()[0]; c.Aborted || c.Usage.OutputTokens != 20 {
		t.Errorf("call = %+v", c)
	}
}

func TestCloseCutsSlowStream(t *testing.T) {
	s, err := Start(Options{SlowInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(req{Model: "m", Stream: true, Tools: agentTools, Messages: []any{userText("scenario:slow")}})
	resp, err := http.Post(s.URL()+"/v1/messages", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	go func() { _, _ = io.Copy(io.Discard, br) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on a slow stream")
	}
	if l := s.Ledger(); len(l) != 1 || !l[0].Aborted {
		t.Errorf("ledger = %+v", l)
	}
}

func TestOtherPaths(t *testing.T) {
	var log bytes.Buffer
	s := startServer(t, Options{RequestLog: &log})
	resp, err := http.Post(s.URL()+"/v1/messages/count_tokens?beta=true", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ct); err != nil || resp.StatusCode != 200 || ct.InputTokens <= 0 {
		t.Errorf("count_tokens: %d %+v %v", resp.StatusCode, ct, err)
	}
	resp.Body.Close()

	resp, err = http.Get(s.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Errorf("models: %d", resp.StatusCode)
	}
	resp.Body.Close()

	resp, err = http.Get(s.URL() + "/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	resp.Body.Close()

	post(t, s, req{Model: "m", Messages: []any{userText("hi")}})
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("request log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("request log has %d lines", len(lines))
	}
	if lines[2]["path"] != "/v1/nope" || lines[2]["unknown_path"] != true {
		t.Errorf("unknown path line = %v", lines[2])
	}
	if lines[3]["role"] != RoleSide || lines[3]["body"].(map[string]any)["model"] != "m" {
		t.Errorf("messages line = %v", lines[3])
	}
	if len(s.Ledger()) != 1 {
		t.Errorf("only model calls go to the ledger: %+v", s.Ledger())
	}
}

// TestCutStreams: the first streamed main call breaks after message_start
// (the client reads an error, not a clean end) and is recorded aborted; the
// next is whole.
func TestCutStreams(t *testing.T) {
	s := startServer(t, Options{CutStreams: 1})
	body := req{Model: "m", Tools: agentTools, Stream: true, Messages: []any{userText("scenario:tool")}}
	resp := post(t, s, body)
	b, err := io.ReadAll(resp.Body)
	if err == nil || !strings.Contains(string(b), "message_start") || strings.Contains(string(b), "message_stop") {
		t.Errorf("cut stream: err %v, body %q", err, b)
	}
	if evs := streamEvents(t, s, body); evs[len(evs)-1].Name != "message_stop" {
		t.Errorf("the second call is cut too: %v", evs[len(evs)-1])
	}
	l := s.Ledger()
	if len(l) != 2 || !l[0].Aborted || l[1].Aborted {
		t.Errorf("ledger %+v", l)
	}
}

// TestEndStreamsEarly: the first streamed main call ends after
// message_start as an answer that ended (the client reads no error, and no
// message_stop) and is recorded aborted; the next is whole.
func TestEndStreamsEarly(t *testing.T) {
	s := startServer(t, Options{EndStreamsEarly: 1})
	body := req{Model: "m", Tools: agentTools, Stream: true, Messages: []any{userText("scenario:tool")}}
	resp := post(t, s, body)
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), "message_start") || strings.Contains(string(b), "message_stop") {
		t.Errorf("stream ended early: err %v, body %q", err, b)
	}
	if evs := streamEvents(t, s, body); evs[len(evs)-1].Name != "message_stop" {
		t.Errorf("the second call ends early too: %v", evs[len(evs)-1])
	}
	l := s.Ledger()
	if len(l) != 2 || !l[0].Aborted || l[1].Aborted {
		t.Errorf("ledger %+v", l)
	}
}

// TestReplyDelay: main-agent replies wait ReplyDelay; side calls (the
// classifier here) are answered without it.
func TestReplyDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := startServer(t, Options{ReplyDelay: delay})
	began := time.Now()
	if evs := streamEvents(t, s, req{Model: "m", Tools: agentTools, Messages: []any{userText("scenario:tool")}}); evs[len(evs)-1].Name != "message_stop" {
		t.Fatalf("main call: %v", evs)
	}
	if took := time.Since(began); took < delay {
		t.Errorf("the main call was answered after %s, before its delay of %s", took, delay)
	}

	// A side call under an hour's delay would hit the client's timeout.
	slow := startServer(t, Options{ReplyDelay: time.Hour})
	data, err := json.Marshal(req{Model: "m", Stop: []any{"</severity>"},
		System:   []any{map[string]any{"type": "text", "text": "You are a security monitor for autonomous AI coding agents."}},
		Messages: []any{userText("<transcript>\n", `{"Bash":"echo hello"}`, "</transcript>\n")}})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(slow.URL()+"/v1/messages", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("side call: %v", err)
	}
	resp.Body.Close()
	if l := slow.Ledger(); len(l) != 1 || l[0].Role != RoleSide {
		t.Errorf("ledger %+v", l)
	}
}
