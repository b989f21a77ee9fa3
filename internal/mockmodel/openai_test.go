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

	"github.com/agentrun-dev/agentrun/events"
)

// codexTools and piTools are the function tools each CLI offers (a part).
var (
	codexTools = []any{map[string]any{"type": "function", "name": "exec_command"}, map[string]any{"type": "web_search"}}
	piTools    = []any{map[string]any{"type": "function", "function": map[string]any{"name": "read"}},
		map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}
)

func postJSON(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// responsesInput is codex's input: its instructions and environment as a
// developer and a user message, then the prompt, then the items so far.
func responsesInput(prompt string, items ...any) []any {
	msg := func(role, text string) any {
		return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": "input_text", "text": text}}}
	}
	return append([]any{msg("developer", "You are Codex."), msg("user", "<environment_context>/w</environment_context>"), msg("user", prompt)}, items...)
}

func streamResponses(t *testing.T, s *Server, input any) []sseEvent {
	t.Helper()
	resp := postJSON(t, s.URL()+"/v1/responses", map[string]any{"model": "gpt-5.5", "stream": true, "input": input, "tools": codexTools})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return parseSSE(t, resp.Body)
}

func TestResponsesParallel(t *testing.T) {
	s := startServer(t, Options{})
	evs := streamResponses(t, s, responsesInput("scenario:parallel go"))
	var names []string
	for i, ev := range evs {
		names = append(names, ev.Name)
		if ev.Data["type"] != ev.Name || ev.Data["sequence_number"] != float64(i) {
			t.Errorf("event %d %q carries type %v sequence %v", i, ev.Name, ev.Data["type"], ev.Data["sequence_number"])
		}
	}
	if names[0] != "response.created" || names[len(names)-1] != "response.completed" {
		t.Fatalf("events %v", names)
	}
	var items []map[string]any
	var text, summary, args string
	for _, ev := range evs {
		switch ev.Name {
		case "response.output_item.done":
			items = append(items, ev.Data["item"].(map[string]any))
		case "response.output_text.delta":
			text += ev.Data["delta"].(string)
		case "response.reasoning_summary_text.delta":
			summary += ev.Data["delta"].(string)
		case "response.function_call_arguments.delta":
			args += ev.Data["delta"].(string)
		}
	}
	if len(items) != 4 || items[0]["type"] != "reasoning" || items[1]["type"] != "message" || items[2]["type"] != "function_call" || items[3]["type"] != "function_call" {
		t.Fatalf("items %v", items)
	}
	if summary != "I should list the files and echo a word, both at once." || text != "Running two commands in parallel." {
		t.Errorf("reasoning %q text %q", summary, text)
	}
	for i, cmd := range map[int]string{2: "ls", 3: "echo two"} {
		it := items[i]
		if it["name"] != "exec_command" || it["arguments"] != `{"cmd":"`+cmd+`"}` || !strings.HasPrefix(it["call_id"].(string), "call_mock_parallel_main_0_") {
			t.Errorf("function call %d = %v", i, it)
		}
	}
	if args != `{"cmd":"ls"}{"cmd":"echo two"}` {
		t.Errorf("argument deltas %q", args)
	}
	resp := evs[len(evs)-1].Data["response"].(map[string]any)
	u := resp["usage"].(map[string]any)
	// input_tokens includes the cached tokens, as OpenAI's does.
	if resp["status"] != "completed" || resp["id"] != "resp_mock_parallel_main_0" || u["input_tokens"] != 1200.0 ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"] != 1000.0 || u["output_tokens"] != 30.0 ||
		u["output_tokens_details"].(map[string]any)["reasoning_tokens"] != 7.0 || u["total_tokens"] != 1230.0 {
		t.Errorf("response.completed = %v", resp)
	}
	// The ledger has the unified meaning: input without the cached part.
	want := Call{Seq: 1, API: APIResponses, Scenario: "parallel", Role: RoleMain, Step: 0, Model: "gpt-5.5", Status: 200, Stream: true,
		Usage: Usage{InputTokens: 200, CacheReadTokens: 1000, OutputTokens: 30}}
	if l := s.Ledger(); len(l) != 1 || l[0] != want {
		t.Errorf("ledger %+v, want %+v", l, want)
	}
}

// TestResponsesSteps: the step is the number of runs of model output in
// the input, however many items one reply had.
func TestResponsesSteps(t *testing.T) {
	s := startServer(t, Options{})
	reply := []any{
		map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}},
		map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "x"}}},
		map[string]any{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
		map[string]any{"type": "function_call", "call_id": "c2", "name": "exec_command", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "ok"},
		map[string]any{"type": "function_call_output", "call_id": "c2", "output": "ok"},
	}
	evs := streamResponses(t, s, responsesInput("scenario:parallel go", reply...))
	var text string
	for _, ev := range evs {
		if ev.Name == "response.output_text.done" {
			text = ev.Data["text"].(string)
		}
	}
	if !strings.HasPrefix(text, "Both commands finished.") {
		t.Errorf("step 1 text %q", text)
	}
	// A plain string input is the prompt.
	streamResponses(t, s, "scenario:tool go")
	l := s.Ledger()
	if l[0].Step != 1 || l[0].Usage != (Usage{InputTokens: 210, CacheReadTokens: 2000, OutputTokens: 35}) || l[1].Scenario != "tool" || l[1].Step != 0 {
		t.Errorf("ledger %+v", l)
	}
}

// chatChunk is one decoded Chat Completions chunk.
type chatChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// streamChat posts a streaming chat request and returns its chunks; it
// fails unless the stream is "data: " lines ending with [DONE].
func streamChat(t *testing.T, s *Server, body map[string]any) []chatChunk {
	t.Helper()
	body["model"], body["stream"], body["tools"] = "gpt-test", true, piTools
	resp := postJSON(t, s.URL()+"/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var out []chatChunk
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case done:
			t.Fatalf("%q after [DONE]", line)
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: "):
			var c chatChunk
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil || c.Object != "chat.completion.chunk" {
				t.Fatalf("chunk %q: %v", line, err)
			}
			out = append(out, c)
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if !done {
		t.Fatal("no [DONE]")
	}
	return out
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

func TestChatParallel(t *testing.T) {
	s := startServer(t, Options{})
	chunks := streamChat(t, s, map[string]any{"messages": []any{map[string]any{"role": "developer", "content": "You are pi."},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "scenario:parallel go"}}}},
		"stream_options": map[string]any{"include_usage": true}})
	var reasoning, text, finish string
	calls := map[int]*[2]string{}
	for _, c := range chunks[:len(chunks)-1] {
		if len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("chunk %+v", c)
		}
		d := c.Choices[0].Delta
		reasoning += d.ReasoningContent
		text += d.Content
		for _, tc := range d.ToolCalls {
			if calls[tc.Index] == nil {
				calls[tc.Index] = &[2]string{tc.Function.Name}
			}
			calls[tc.Index][1] += tc.Function.Arguments
		}
		if f := c.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if reasoning != "I should list the files and echo a word, both at once." || text != "Running two commands in parallel." || finish != "tool_calls" {
		t.Errorf("reasoning %q text %q finish %q", reasoning, text, finish)
	}
	if len(calls) != 2 || *calls[0] != [2]string{"bash", `{"command":"ls"}`} || *calls[1] != [2]string{"bash", `{"command":"echo two"}`} {
		t.Errorf("tool calls %v %v", calls[0], calls[1])
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.PromptTokens != 1200 || last.Usage.PromptTokensDetails.CachedTokens != 1000 || last.Usage.CompletionTokens != 30 {
		t.Errorf("usage chunk %+v", last)
	}
	want := Call{Seq: 1, API: APIChat, Scenario: "parallel", Role: RoleMain, Step: 0, Model: "gpt-test", Status: 200, Stream: true,
		Usage: Usage{InputTokens: 200, CacheReadTokens: 1000, OutputTokens: 30}}
	if l := s.Ledger(); len(l) != 1 || l[0] != want {
		t.Errorf("ledger %+v, want %+v", l, want)
	}
}

func TestChatStepsAndUsageOption(t *testing.T) {
	s := startServer(t, Options{})
	msgs := []any{user("scenario:tool go"), map[string]any{"role": "assistant", "content": nil,
		"tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "bash", "arguments": "{}"}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": "ok"}}
	// Without stream_options.include_usage no usage is served.
	chunks := streamChat(t, s, map[string]any{"messages": msgs})
	var text string
	for _, c := range chunks {
		if c.Usage != nil {
			t.Errorf("usage without include_usage: %+v", c.Usage)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
		}
	}
	if text != "Done: wrote hello.txt" {
		t.Errorf("step 1 text %q", text)
	}
	if c := s.Ledger()[0]; c.Step != 1 || c.Usage != (Usage{}) {
		t.Errorf("call %+v", c)
	}
}

func TestOpenAIErrors(t *testing.T) {
	for _, tc := range []struct {
		path, scenario string
		status         int
		errType        string
	}{
		{"/v1/responses", "error401", 401, "invalid_request_error"},
		{"/v1/responses", "error500", 500, "server_error"},
		{"/v1/chat/completions", "error401", 401, "invalid_request_error"},
		{"/v1/chat/completions", "error500", 500, "server_error"},
	} {
		t.Run(tc.path+" "+tc.scenario, func(t *testing.T) {
			s := startServer(t, Options{})
			body := map[string]any{"model": "m", "stream": true, "tools": codexTools, "input": "scenario:" + tc.scenario}
			if strings.Contains(tc.path, "chat") {
				body = map[string]any{"model": "m", "stream": true, "tools": piTools, "messages": []any{user("scenario:" + tc.scenario)}}
			}
			resp := postJSON(t, s.URL()+tc.path, body)
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || e.Error.Type != tc.errType || e.Error.Message == "" {
				t.Errorf("status %d body %+v", resp.StatusCode, e)
			}
			if c := s.Ledger()[0]; c.Status != tc.status || c.Usage != (Usage{}) || c.Scenario != tc.scenario {
				t.Errorf("call %+v", c)
			}
		})
	}
}

func TestOpenAISideAndNonStreaming(t *testing.T) {
	s := startServer(t, Options{})
	// No tools: a side call (a title, a summary), answered briefly.
	resp := postJSON(t, s.URL()+"/v1/responses", map[string]any{"model": "m", "stream": true, "input": "scenario:tool summarize"})
	evs := parseSSE(t, resp.Body)
	if c := s.Ledger()[0]; c.Role != RoleSide || evs[len(evs)-1].Name != "response.completed" {
		t.Errorf("side call %+v", c)
	}
	// Not streamed: the whole reply in one object, with its usage.
	resp = postJSON(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "m", "tools": piTools, "messages": []any{user("scenario:tool")}})
	var chat struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&chat); err != nil || resp.StatusCode != 200 || chat.Object != "chat.completion" ||
		len(chat.Choices) != 1 || chat.Choices[0].FinishReason != "tool_calls" || len(chat.Choices[0].Message.ToolCalls) != 1 ||
		chat.Choices[0].Message.ToolCalls[0].Function.Name != "bash" || chat.Usage.PromptTokens == 0 {
		t.Errorf("non-streaming chat: status %d %+v %v", resp.StatusCode, chat, err)
	}
	if c := s.Ledger()[1]; c.Stream || c.Status != 200 || c.Usage.InputTokens == 0 {
		t.Errorf("non-streaming call %+v", c)
	}
	resp = postJSON(t, s.URL()+"/v1/responses", map[string]any{"model": "m", "tools": codexTools, "input": responsesInput("scenario:tool go")})
	var whole struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct{ Type, Name string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&whole); err != nil || whole.Object != "response" || whole.Status != "completed" ||
		len(whole.Output) == 0 || whole.Output[len(whole.Output)-1].Name != "exec_command" {
		t.Errorf("non-streaming response: %+v %v", whole, err)
	}
	resp = postJSON(t, s.URL()+"/v1/responses", "not an object")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad JSON: status %d", resp.StatusCode)
	}
}

func TestOpenAISlowStopsWhenClientGoesAway(t *testing.T) {
	for _, path := range []string{"/v1/responses", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			s := startServer(t, Options{SlowInterval: 10 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := map[string]any{"model": "m", "stream": true, "tools": codexTools, "input": "scenario:slow"}
			if strings.Contains(path, "chat") {
				body = map[string]any{"model": "m", "stream": true, "tools": piTools, "messages": []any{user("scenario:slow")},
					"stream_options": map[string]any{"include_usage": true}}
			}
			data, _ := json.Marshal(body)
			hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, bytes.NewReader(data))
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for n := 0; n < 5 && sc.Scan(); {
				if strings.Contains(sc.Text(), "slow ") {
					n++
				}
			}
			cancel()
			deadline := time.Now().Add(5 * time.Second)
			for len(s.Ledger()) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			// OpenAI sends usage only at the end: a cut stream served none.
			if l := s.Ledger(); len(l) != 1 || !l[0].Aborted || l[0].Usage != (Usage{}) {
				t.Fatalf("ledger %+v", l)
			}
		})
	}
}

func TestVerifyTurnUsage(t *testing.T) {
	ledger := []Call{
		{Role: RoleMain, Status: 200, Usage: Usage{InputTokens: 200, CacheReadTokens: 1000, OutputTokens: 30}},
		{Role: RoleMain, Status: 200, Usage: Usage{InputTokens: 210, CacheReadTokens: 2000, OutputTokens: 35}},
	}
	turn := func(in, cached, out int64) []events.Event {
		c := events.TokenCounts{InputTokens: &in, CacheReadTokens: &cached, CacheWriteTokens: events.Int64(0), OutputTokens: &out}
		total := events.NewTotals()
		total.AddModel("gpt-5.5", c)
		return []events.Event{
			&events.Usage{Model: events.String("gpt-5.5"), InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
				CacheReadTokens: c.CacheReadTokens, CacheWriteTokens: c.CacheWriteTokens},
			&events.End{Usage: total},
		}
	}
	if errs := VerifyTurnUsage(turn(410, 3000, 65), ledger); len(errs) != 0 {
		t.Errorf("the turn's sum: %v", errs)
	}
	// codex's raw input_tokens (cached included) is not the unified input.
	if errs := VerifyTurnUsage(turn(3410, 3000, 65), ledger); len(errs) == 0 {
		t.Error("an unconverted input passed")
	}
	if errs := VerifyUsage(turn(410, 3000, 65), ledger, false); len(errs) == 0 {
		t.Error("VerifyUsage took one usage event for two calls")
	}
}

func TestAPIKeyRequired(t *testing.T) {
	s := startServer(t, Options{APIKey: "real-key"})
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "tools": codexTools, "input": responsesInput("scenario:tool go")})
	for _, tc := range []struct {
		header, value string
		status        int
		key           string
	}{
		{"", "", 401, "missing"},
		{"Authorization", "Bearer agentrun-stand-in-x", 401, "wrong"},
		{"Authorization", "Bearer real-key", 200, "ok"},
		{"X-Api-Key", "real-key", 200, "ok"},
	} {
		req, _ := http.NewRequest("POST", s.URL()+"/v1/responses", bytes.NewReader(body))
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l := s.Ledger()
		if resp.StatusCode != tc.status || l[len(l)-1].Key != tc.key {
			t.Errorf("%s %q: status %d, call %+v", tc.header, tc.value, resp.StatusCode, l[len(l)-1])
		}
	}
}

// The probe scenario works over the OpenAI APIs too: the command, then
// its output as the answer.
func TestOpenAIProbe(t *testing.T) {
	s := startServer(t, Options{})
	prompt := "scenario:probe probe<<<echo hi>>>"
	evs := streamResponses(t, s, responsesInput(prompt))
	var args string
	for _, e := range evs {
		if e.Name == "response.function_call_arguments.done" {
			args, _ = e.Data["arguments"].(string)
		}
	}
	if !strings.Contains(args, `"cmd":"echo hi"`) {
		t.Fatalf("first step: arguments %q", args)
	}
	items := []any{map[string]any{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": args},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "hi\n"}}
	evs = streamResponses(t, s, responsesInput(prompt, items...))
	var text string
	for _, e := range evs {
		if e.Name == "response.output_text.done" {
			text, _ = e.Data["text"].(string)
		}
	}
	if text != ProbeAnswerPrefix+"hi\n" {
		t.Errorf("answer %q", text)
	}
}

// TestChatDshBash: dsh's bash tool requires a description beside the
// command; the call the mock makes gives the script's one.
func TestChatDshBash(t *testing.T) {
	s := startServer(t, Options{})
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "bash",
		"parameters": map[string]any{"type": "object", "required": []string{"command", "description"}}}}
	body := map[string]any{"model": "deepseek-v4-flash", "messages": []any{user("scenario:tool please")}, "tools": []any{tool}}
	resp := postJSON(t, s.URL()+"/v1/chat/completions", body)
	defer resp.Body.Close()
	var got struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Choices) != 1 || len(got.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("reply %+v: %v", got, err)
	}
	f := got.Choices[0].Message.ToolCalls[0].Function
	if f.Name != "bash" || f.Arguments != `{"command":"echo hello > hello.txt","description":"Write hello.txt"}` {
		t.Errorf("call %s %s", f.Name, f.Arguments)
	}
}
