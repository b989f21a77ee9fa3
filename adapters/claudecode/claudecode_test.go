package claudecode

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/records"
)

// replay runs raw lines through a fresh adapter and the aggregator, as
// `agentrun translate` does, and returns the events and the verdict.
func replay(t *testing.T, raw string, exit adapters.Exit) ([]events.Event, adapters.Verdict) {
	t.Helper()
	return adapterstest.Replay(t, New(), Name, []byte(raw), exit)
}

// Hand-written lines in claude-code's stream-json format (edge cases the real
// captures in testdata/real do not cover).
const (
	seedInit   = `{"type":"system","subtype":"init","cwd":"/home/me/repo","session_id":"S1","tools":["Task","Bash"],"model":"claude-sonnet-5-5","permissionMode":"auto","uuid":"u0"}`
	seedPrompt = `{"type":"user","message":{"role":"user","content":"fix it\u2028now"},"parent_tool_use_id":null,"session_id":"S1","uuid":"u1","isReplay":true}`
	seedBash   = `{"type":"assistant","message":{"model":"claude-sonnet-5-5","id":"msg_01A","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"Bash","input":{"command":"cargo test","description":"Run tests"}}],"usage":{"input_tokens":2,"cache_creation_input_tokens":4950,"cache_read_input_tokens":28275,"output_tokens":16}},"parent_tool_use_id":null,"session_id":"S1","uuid":"u2"}`
	seedBashOK = `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01A","type":"tool_result","content":"ok"}]},"parent_tool_use_id":null,"session_id":"S1","uuid":"u3","tool_use_result":{"stdout":"ok","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false}}`
	seedText   = `{"type":"assistant","message":{"model":"claude-sonnet-5-5","id":"msg_01B","type":"message","role":"assistant","content":[{"type":"text","text":"All tests pass."}],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":33225,"output_tokens":9}},"parent_tool_use_id":null,"session_id":"S1","uuid":"u4"}`
	seedResult = `{"type":"result","subtype":"success","is_error":false,"result":"All tests pass.","stop_reason":"end_turn","terminal_reason":"completed","num_turns":2,"total_cost_usd":0.0436916,"usage":{"input_tokens":5},"modelUsage":{"claude-haiku-4-5-20251001":{"inputTokens":925,"outputTokens":18,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":0.001015},"claude-sonnet-5-5":{"inputTokens":5,"outputTokens":25,"cacheReadInputTokens":61500,"cacheCreationInputTokens":5050,"costUSD":0.0426766}},"permission_denials":[],"session_id":"S1","uuid":"u5","result_index":0}`
)

func TestSeedRun(t *testing.T) {
	raw := strings.Join([]string{seedInit, seedPrompt, seedBash, seedBashOK, seedText, seedResult}, "\n")
	evs, v := replay(t, raw, adapters.Exit{})
	if got, want := adapterstest.Types(evs), "start prompt tool_start usage tool text usage end"; got != want {
		t.Fatalf("types:\n got %s\nwant %s", got, want)
	}
	if v.Failed {
		t.Errorf("verdict failed: %+v", v)
	}
	if p := evs[1].(*events.Prompt); p.Text != "fix it\u2028now" || p.Images == nil {
		t.Errorf("prompt = %+v (U+2028 is not a line break)", p)
	}
	if ts := evs[2].(*events.ToolStart); ts.Summary != "Bash: cargo test" || ts.Parent != nil {
		t.Errorf("tool_start = %+v", ts)
	}
	u := evs[3].(*events.Usage)
	if *u.InputTokens != 2 || *u.CacheReadTokens != 28275 || *u.CacheWriteTokens != 4950 || *u.ContextTokens != 33227 || u.CostUSD != nil {
		t.Errorf("usage = %+v", u)
	}
	end := adapterstest.End(t, evs)
	if *end.Result != "All tests pass." || *end.Usage.CostUSD != 0.0436916 || *end.Usage.InputTokens != 930 {
		t.Errorf("end = %+v", end)
	}
	if len(end.Usage.ByModel) != 2 || *end.Usage.ByModel["claude-haiku-4-5-20251001"].CostUSD != 0.001015 {
		t.Errorf("by_model = %+v", end.Usage.ByModel)
	}
}

func TestUsageOncePerMessageID(t *testing.T) {
	// One assistant line per content block, all with the same message.id:
	// one usage event, not three.
	block := func(content string) string {
		return `{"type":"assistant","message":{"model":"m","id":"msg_X","content":[` + content + `],"usage":{"input_tokens":1,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":1}},"parent_tool_use_id":null}`
	}
	raw := strings.Join([]string{
		block(`{"type":"thinking","thinking":"","signature":"x"}`),
		block(`{"type":"text","text":"looking"}`),
		block(`{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/a"}}`),
		`{"type":"stream_event","event":{"type":"message_delta","usage":{"output_tokens":7}},"parent_tool_use_id":null}`,
	}, "\n")
	evs, _ := replay(t, raw, adapters.Exit{})
	n := 0
	for _, e := range evs {
		if u, ok := e.(*events.Usage); ok {
			n++
			if u.OutputTokens != nil {
				// The assistant lines' output_tokens is message_start's
				// placeholder, and a message_delta without its message_start
				// is not tied to msg_X: the output is unknown.
				t.Errorf("output = %d, want null", *u.OutputTokens)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d usage events, want 1", n)
	}
}

func TestStreamEventsGiveFinalOutput(t *testing.T) {
	raw := strings.Join([]string{
		`{"type":"stream_event","event":{"type":"message_start","message":{"model":"m","id":"msg_1","content":[],"usage":{"input_tokens":5,"cache_creation_input_tokens":6,"cache_read_input_tokens":7,"output_tokens":1}}},"parent_tool_use_id":null}`,
		`{"type":"assistant","message":{"model":"m","id":"msg_1","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"cache_creation_input_tokens":6,"cache_read_input_tokens":7,"output_tokens":1}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"message_delta","usage":{"input_tokens":5,"cache_creation_input_tokens":6,"cache_read_input_tokens":7,"output_tokens":42}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":null}`,
	}, "\n")
	evs, _ := replay(t, raw, adapters.Exit{})
	if got := adapterstest.Types(evs); got != "start text usage end" {
		t.Fatalf("types %s", got)
	}
	if u := evs[2].(*events.Usage); *u.OutputTokens != 42 || *u.InputTokens != 5 {
		t.Errorf("usage = in %d out %d, want 5 and 42", *u.InputTokens, *u.OutputTokens)
	}
}

func TestVerdicts(t *testing.T) {
	apiErr := `{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"API Error: 401 invalid key"}],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}},"parent_tool_use_id":null,"error":"authentication_failed","is_api_error_message":true}`
	apiResult := `{"type":"result","subtype":"success","is_error":true,"result":"API Error: 401 invalid key","terminal_reason":"api_error","total_cost_usd":0,"modelUsage":{},"permission_denials":[]}`
	interrupted := `{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_streaming","errors":["[ede_diagnostic] result_type=user"],"total_cost_usd":0.001,"modelUsage":{"h":{"inputTokens":9,"costUSD":0.001}}}`
	okResult := `{"type":"result","subtype":"success","is_error":false,"result":"done","modelUsage":{"m":{"inputTokens":1}}}`
	tests := []struct {
		name       string
		raw        string
		exit       adapters.Exit
		wantFailed bool
		wantDetail string
		check      func(t *testing.T, end *events.End)
	}{
		{"success", okResult, adapters.Exit{}, false, "", nil},
		{"non-zero exit fails even after a good result", okResult, adapters.Exit{Code: 1}, true, "", nil},
		{"no result means killed", seedInit, adapters.Exit{}, true, "claude-code exited without a result (killed or crashed before the turn ended)", nil},
		{"api error", apiErr + "\n" + apiResult, adapters.Exit{Code: 1}, true, "API Error: 401 invalid key", func(t *testing.T, end *events.End) {
			if end.Usage.CostUSD != nil || end.Usage.InputTokens != nil || len(end.Usage.ByModel) != 0 {
				t.Errorf("empty modelUsage must give null usage and cost: %+v", end.Usage)
			}
			if end.Result != nil {
				t.Errorf("the synthetic error text is not the agent's result: %q", *end.Result)
			}
		}},
		{"interrupt result", interrupted, adapters.Exit{}, true, "[ede_diagnostic] result_type=user", nil},
		{"last result wins", strings.Join([]string{interrupted, okResult}, "\n"), adapters.Exit{}, false, "", nil},
		{"signal", "", adapters.Exit{Signaled: true}, true, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, v := replay(t, tt.raw, tt.exit)
			if v.Failed != tt.wantFailed || (tt.wantDetail != "" && v.Detail != tt.wantDetail) {
				t.Errorf("verdict = %+v, want failed=%v detail %q", v, tt.wantFailed, tt.wantDetail)
			}
			if tt.check != nil {
				tt.check(t, adapterstest.End(t, evs))
			}
		})
	}
}

func TestPermissionDenied(t *testing.T) {
	raw := strings.Join([]string{
		`{"type":"assistant","message":{"model":"m","id":"msg_1","content":[{"type":"tool_use","id":"toolu_D","name":"Bash","input":{"command":"rm -rf /"}}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null}`,
		`{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"toolu_D","decision_reason_type":"classifier","message":"denied"}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Permission denied","is_error":true,"tool_use_id":"toolu_D"}]},"parent_tool_use_id":null}`,
	}, "\n")
	evs, _ := replay(t, raw, adapters.Exit{})
	for _, e := range evs {
		if tool, ok := e.(*events.Tool); ok {
			if !tool.Denied || tool.Error == nil || *tool.Error {
				t.Errorf("denied tool: denied=%v error=%v, want true/false", tool.Denied, tool.Error)
			}
			return
		}
	}
	t.Fatal("no tool event")
}

func TestSeedSubagents(t *testing.T) {
	// claude-code's two-subagent flow: foreground Agent calls, inner events with
	// parent_tool_use_id, task events, Agent tool results end them.
	raw := strings.Join([]string{
		`{"type":"assistant","message":{"model":"big","id":"msg_M","content":[{"type":"tool_use","id":"A","name":"Agent","input":{"description":"Create sub1.txt","prompt":"p","subagent_type":"general-purpose"}}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null}`,
		`{"type":"assistant","message":{"model":"big","id":"msg_M","content":[{"type":"tool_use","id":"B","name":"Agent","input":{"description":"Run ls","prompt":"q","subagent_type":"Explore","model":"haiku"}}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null}`,
		`{"type":"system","subtype":"task_started","task_id":"T1","tool_use_id":"A","description":"Create sub1.txt","subagent_type":"general-purpose","is_backgrounded":false,"spawn_depth":1,"task_type":"local_agent"}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"p"}]},"parent_tool_use_id":"A"}`,
		`{"type":"assistant","message":{"model":"small","id":"msg_A1","content":[{"type":"tool_use","id":"W","name":"Write","input":{"file_path":"sub1.txt","content":"x"}}],"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}},"parent_tool_use_id":"A"}`,
		`{"type":"assistant","message":{"model":"small","id":"msg_B1","content":[{"type":"tool_use","id":"L","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":20,"output_tokens":6,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}},"parent_tool_use_id":"B"}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"ok","tool_use_id":"W"}]},"parent_tool_use_id":"A"}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Exit code 2","is_error":true,"tool_use_id":"L"}]},"parent_tool_use_id":"B"}`,
		`{"type":"system","subtype":"task_notification","task_id":"T1","tool_use_id":"A","status":"completed","summary":"done","output_file":""}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"report A"}],"tool_use_id":"A"}]},"parent_tool_use_id":null,"tool_use_result":{"status":"completed"}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"report B"}],"tool_use_id":"B"}]},"parent_tool_use_id":null,"tool_use_result":{"status":"completed"}}`,
	}, "\n")
	evs, _ := replay(t, raw, adapters.Exit{})
	want := "start subagent_start subagent_start tool_start tool_start tool tool usage subagent_end usage usage subagent_end end"
	if got := adapterstest.Types(evs); got != want {
		t.Fatalf("types:\n got %s\nwant %s", got, want)
	}
	a, b := evs[1].(*events.SubagentStart), evs[2].(*events.SubagentStart)
	if a.Number != 1 || b.Number != 2 || b.Kind != "Explore" || *b.Model != "haiku" || a.Model != nil {
		t.Errorf("subagent starts: %+v %+v", a, b)
	}
	w := evs[3].(*events.ToolStart)
	if *w.Parent != "A" || w.Summary != "Write: sub1.txt" {
		t.Errorf("inner tool_start = %+v", w)
	}
	endA := evs[8].(*events.SubagentEnd)
	if endA.ID != "A" || *endA.Usage.InputTokens != 10 || endA.Status != "finished" {
		t.Errorf("subagent_end A = %+v", endA)
	}
}

func TestBackgroundSubagentEndsOnNotification(t *testing.T) {
	raw := strings.Join([]string{
		`{"type":"assistant","message":{"model":"big","id":"msg_M","content":[{"type":"tool_use","id":"A","name":"Agent","input":{"description":"bg","prompt":"p","subagent_type":"general-purpose","run_in_background":true}}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Async agent launched","tool_use_id":"A"}]},"parent_tool_use_id":null,"tool_use_result":{"status":"async_launched"}}`,
		`{"type":"assistant","message":{"model":"big","id":"msg_M2","content":[{"type":"text","text":"waiting"}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"waiting","result_index":0,"modelUsage":{"big":{"inputTokens":2}}}`,
		`{"type":"system","subtype":"task_notification","task_id":"T","tool_use_id":"A","status":"completed","summary":"s","output_file":""}`,
		`{"type":"system","subtype":"init","session_id":"S"}`,
		`{"type":"assistant","message":{"model":"big","id":"msg_M3","content":[{"type":"text","text":"got it"}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"got it","result_index":1,"origin":{"kind":"task-notification"},"modelUsage":{"big":{"inputTokens":3}}}`,
	}, "\n")
	evs, v := replay(t, raw, adapters.Exit{})
	want := "start subagent_start usage text usage subagent_end text usage end"
	if got := adapterstest.Types(evs); got != want {
		t.Fatalf("types:\n got %s\nwant %s", got, want)
	}
	end := adapterstest.End(t, evs)
	if v.Failed || *end.Result != "got it" || *end.Usage.InputTokens != 3 {
		t.Errorf("end = %+v (the last result wins)", end)
	}
}

func TestNoSubagentsFlag(t *testing.T) {
	l, err := New().Launch(adapters.LaunchSpec{Binary: "claude", Prompt: "p", NoSubagents: true, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(l.Argv, " "), "--disallowedTools Task Agent") {
		t.Errorf("argv %v does not take the subagent tool away", l.Argv)
	}
}

func TestLaunchSeedCommand(t *testing.T) {
	img := t.TempDir() + "/a.png"
	if err := os.WriteFile(img, []byte("\x89PNG"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := New().Launch(adapters.LaunchSpec{Binary: "/bin/claude", Prompt: "hello", Model: "sonnet", Images: []string{img}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Join(l.Argv, " ")
	for _, want := range []string{"-p", "--input-format stream-json", "--replay-user-messages", "--output-format stream-json", "--verbose", "--model sonnet", "--no-session-persistence", "--permission-mode auto", "--strict-mcp-config"} {
		if !strings.Contains(argv, want) {
			t.Errorf("argv %q lacks %q", argv, want)
		}
	}
	if strings.Contains(argv, "hello") {
		t.Errorf("the prompt goes on stdin, not argv: %q", argv)
	}
	if !bytes.Contains(l.Stdin, []byte(`"type":"image"`)) || !bytes.HasSuffix(l.Stdin, []byte("\n")) || !l.EchoesPrompt {
		t.Errorf("stdin = %s", l.Stdin)
	}
}

// TestTextDeltasArePartial: content_block_delta's text_delta becomes
// records.PartialText (the live view's), the assistant line the text event.
func TestTextDeltasArePartial(t *testing.T) {
	a := New()
	var partial []string
	var texts int
	emit := func(r records.Record) {
		switch r := r.(type) {
		case records.PartialText:
			partial = append(partial, r.Parent+"|"+r.Text)
		case records.Text:
			texts++
		}
	}
	for _, l := range []string{
		`{"type":"stream_event","event":{"type":"message_start","message":{"model":"m","id":"msg_1","content":[],"usage":{"input_tokens":5,"output_tokens":1}}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"slow "}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"slow "}},"parent_tool_use_id":"toolu_1"}`,
		`{"type":"assistant","message":{"model":"m","id":"msg_1","content":[{"type":"text","text":"slow "}],"usage":{"input_tokens":5,"output_tokens":1}},"parent_tool_use_id":null}`,
	} {
		a.Translate([]byte(l), emit)
	}
	if strings.Join(partial, ",") != "|slow ,toolu_1|slow " || texts != 1 {
		t.Errorf("partial %q, %d texts", partial, texts)
	}
}
