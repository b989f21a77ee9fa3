package dsh

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/events/records"
)

// Hand-written lines in the shape of agentrun's plugin over dsh
// 0.1.0-rc.8 (testdata/real has real ones), for what the captures do not
// cover: a subagent's session, a tool error, a usage chunk without its
// assistant message.
const (
	lineSession    = `{"agentrun":"session","header":{"version":0,"id":"S1","createdAt":1,"cwd":"/w"}}`
	linePrompt     = `{"agentrun":"event","session":"S1","event":{"type":"user/message","seq":7,"time":1,"data":{"content":[{"type":"text","text":"fix it"}],"source":{"kind":"user"},"role":"user","id":"u1"}}}`
	lineContext    = `{"agentrun":"event","session":"S1","event":{"type":"user/message","seq":8,"time":1,"data":{"content":[{"type":"text","text":"Current runtime context."}],"source":{"kind":"runtime-context"},"role":"user","id":"u2"}}}`
	lineReqContext = `{"agentrun":"event","session":"S1","event":{"type":"request/context","seq":9,"time":1,"data":{"provider":"deepseek-official","model":"deepseek-v4-flash","contextWindow":1000000}}}`
	lineStep       = `{"agentrun":"event","session":"S1","event":{"type":"step/start","seq":10,"time":1,"data":{"turn":1,"step":1}}}`
	lineTextDelta  = `{"agentrun":"event","session":"S1","event":{"type":"assistant/chunk","seq":11,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Let me "}}}}`
	lineUsageChunk = `{"agentrun":"event","session":"S1","event":{"type":"assistant/chunk","seq":12,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":12,"outputTokens":7,"cacheReadTokens":300,"reasoningTokens":0}}}}}`
	lineAnswer     = `{"agentrun":"event","session":"S1","event":{"type":"assistant/message","seq":13,"time":1,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"thinking","text":"hmm"},{"type":"text","text":"Let me look."},{"type":"tool-call","id":"c1","name":"read","arguments":"{\"file_path\":\"src/x.ts\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-pro"}},"usage":{"inputTokens":12,"outputTokens":7,"cacheReadTokens":300,"reasoningTokens":0}}}}`
	lineCall       = `{"agentrun":"event","session":"S1","event":{"type":"tool/call","seq":14,"time":1,"data":{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{\"file_path\":\"src/x.ts\"}"}}}`
	lineResult     = `{"agentrun":"event","session":"S1","event":{"type":"tool/result","seq":15,"time":1,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ENOENT"}],"isError":true}],"role":"user","id":"r1"}}}}`
	lineTurnEnd    = `{"agentrun":"event","session":"S1","event":{"type":"turn/end","seq":20,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}}`
	lineTurnError  = `{"agentrun":"event","session":"S1","event":{"type":"turn/end","seq":20,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"rate limited","code":"RATE_LIMIT","status":429}}}}}`
	lineStdout     = `{"agentrun":"stdout","text":"Let me look.\n"}`
	lineSubSession = `{"agentrun":"session","header":{"version":0,"id":"S2","createdAt":2,"cwd":"/w","parentSession":{"id":"S1"},"delegationDepth":1}}`
	lineSubCall    = `{"agentrun":"event","session":"S2","event":{"type":"tool/call","seq":3,"time":2,"data":{"turn":1,"step":1,"callId":"c9","name":"bash","arguments":"{\"command\":\"ls\"}"}}}`
)

func TestToolErrorTextUsage(t *testing.T) {
	raw := strings.Join([]string{lineSession, linePrompt, lineContext, lineReqContext, lineStep, lineTextDelta, lineUsageChunk, lineAnswer,
		lineCall, lineSubSession, lineSubCall, lineResult, lineStdout, lineTurnEnd}, "\n")
	evs, v := adapterstest.Replay(t, New(), Name, []byte(raw), adapters.Exit{})
	if got, want := adapterstest.Types(evs), "start prompt text usage tool_start tool end"; got != want {
		t.Fatalf("types:\n got %s\nwant %s", got, want)
	}
	adapterstest.Check(t, evs)
	if v.Failed {
		t.Errorf("verdict %+v", v)
	}
	if p := eventstest.Find[*events.Prompt](evs); p.Text != "fix it" {
		t.Errorf("prompt %+v: the runtime context is not the prompt", p)
	}
	tool := eventstest.Find[*events.Tool](evs)
	if tool.ID != "c1" || tool.Summary != "read: src/x.ts" || tool.Denied || tool.Error == nil || !*tool.Error {
		t.Errorf("tool %+v: a failed read is an error, never a denial; the subagent's bash is not the main agent's", tool)
	}
	u := eventstest.Find[*events.Usage](evs)
	if *u.InputTokens != 12 || *u.CacheReadTokens != 300 || *u.CacheWriteTokens != 0 || *u.ContextTokens != 312 || *u.OutputTokens != 7 || u.CostUSD != nil ||
		*u.Model != "deepseek-v4-pro" {
		t.Errorf("usage %+v", u)
	}
	if end := adapterstest.End(t, evs); *end.Result != "Let me look." {
		t.Errorf("end result %v", end.Result)
	}
}

func TestVerdicts(t *testing.T) {
	tests := []struct {
		lines  []string
		exit   adapters.Exit
		failed bool
		detail string
	}{
		{[]string{lineSession, linePrompt, lineTurnEnd}, adapters.Exit{}, false, ""},
		{[]string{lineSession, linePrompt, lineTurnError}, adapters.Exit{Code: 1}, true, "RATE_LIMIT: rate limited"},
		{[]string{lineSession, linePrompt, lineTurnError}, adapters.Exit{}, true, "RATE_LIMIT: rate limited"},
		{[]string{lineSession, linePrompt}, adapters.Exit{}, true, "dsh exited without ending its turn"},
		{[]string{lineSession, linePrompt}, adapters.Exit{Code: 1}, true, ""}, // the runner falls back to stderr
		{[]string{lineSession, linePrompt, lineTurnEnd}, adapters.Exit{Signaled: true}, true, ""},
	}
	for i, tt := range tests {
		_, v := adapterstest.Replay(t, New(), Name, []byte(strings.Join(tt.lines, "\n")), tt.exit)
		if v.Failed != tt.failed || v.Detail != tt.detail {
			t.Errorf("%d: verdict %+v, want failed=%v %q", i, v, tt.failed, tt.detail)
		}
	}
}

// TestCutStep: a step cut before its assistant message (an interrupt)
// still shows the text it streamed and the usage it reported, with the
// model of the request, at Close.
func TestCutStep(t *testing.T) {
	raw := strings.Join([]string{lineSession, linePrompt, lineReqContext, lineStep, lineTextDelta, lineUsageChunk}, "\n")
	evs, v := adapterstest.Replay(t, New(), Name, []byte(raw), adapters.Exit{Code: 130})
	if got, want := adapterstest.Types(evs), "start prompt text usage end"; got != want {
		t.Fatalf("types:\n got %s\nwant %s", got, want)
	}
	if !v.Failed {
		t.Error("an exit 130 succeeded")
	}
	if tx := eventstest.Find[*events.Text](evs); tx.Text != "Let me " {
		t.Errorf("text %q", tx.Text)
	}
	if u := eventstest.Find[*events.Usage](evs); *u.Model != "deepseek-v4-flash" || *u.OutputTokens != 7 {
		t.Errorf("usage %+v", u)
	}
}

func TestSummary(t *testing.T) {
	for _, tt := range [][3]string{
		{"bash", `{"command":"go test ./...","description":"Run the tests"}`, "bash: go test ./..."},
		{"read", `{"file_path":"a.go"}`, "read: a.go"},
		{"grep", `{"pattern":"TODO","path":"src"}`, "grep: TODO in src"},
		{"glob", `{"pattern":"**/*.go"}`, "glob: **/*.go"},
		{"str_replace_editor", `{"command":"view","path":"a.go"}`, "str_replace_editor: view a.go"},
		{"web_search", `{"queries":["a","b"]}`, "web_search: a; b"},
		{"subagent", `{"description":"Find callers","prompt":"..."}`, "subagent: Find callers"},
		{"todo_write", `{"todos":[]}`, "todo_write"},
		{"bash", `not json`, "bash"},
	} {
		if got := summary(tt[0], tt[1]); got != tt[2] {
			t.Errorf("summary(%s, %s) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
}

func readPatch(t *testing.T, state string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "dsh", "agentrun.patch.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var p []map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("the patch is not JSON (which YAML reads): %v\n%s", err, b)
	}
	return p
}

func entry(p []map[string]any, id string) map[string]any {
	for _, e := range p {
		if e["id"] == id {
			return e
		}
	}
	return nil
}

func TestLaunch(t *testing.T) {
	state := t.TempDir()
	l, err := New().Launch(adapters.LaunchSpec{Binary: "/x/dsh", Prompt: "--help me", Model: "deepseek-v4-pro", StateDir: state, NoSubagents: true,
		Env: map[string]string{"DEEPSEEK_BASE_URL": "http://gw:8080/v1", "AGENTRUN_API_KEY_ENV": "GW_KEY", "AGENTRUN_MODEL_RETRIES": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(state, "dsh")
	if want := []string{"/x/dsh", "--profile", "headless", "--patch", filepath.Join(home, "agentrun.patch.yml")}; !slices.Equal(l.Argv, want) {
		t.Errorf("argv %q, want %q: the prompt goes on stdin, never on the command line", l.Argv, want)
	}
	if string(l.Stdin) != "--help me" || !l.EchoesPrompt {
		t.Errorf("stdin %q echoes %v", l.Stdin, l.EchoesPrompt)
	}
	for _, kv := range []string{"DSH_HOME=" + home, "DSH_PERMISSION_MODE=danger-full-access", "DSH_TELEMETRY_DISABLED=1", "NODE_USE_ENV_PROXY=1"} {
		if !slices.Contains(l.Env, kv) {
			t.Errorf("env %q lacks %s", l.Env, kv)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, "agentrun-stream.mjs")); err != nil || string(b) != string(stream) {
		t.Errorf("plugin not written: %v", err)
	}
	p := readPatch(t, state)
	llm, _ := entry(p, "llm-deepseek")["config"].(map[string]any)
	retry, _ := llm["retryPolicy"].(map[string]any)
	if llm["baseURL"] != "http://gw:8080/v1" || llm["apiKeyEnv"] != "GW_KEY" || retry["maxRetries"] != 2.0 || retry["mode"] != "normal" {
		t.Errorf("llm-deepseek %v", llm)
	}
	if m, _ := entry(p, "agent-default-model")["config"].(map[string]any); m["model"] != "deepseek-v4-pro" || m["provider"] != "deepseek-official" {
		t.Errorf("agent-default-model %v", m)
	}
	for _, id := range append([]string{"headless-startup", "session-title-llm"}, subagentTools...) {
		if e := entry(p, id); e == nil || e["disabled"] != true {
			t.Errorf("%s not disabled: %v", id, e)
		}
	}
	if e := entry(p, "hmr"); e == nil || e["disabled"] != false {
		t.Errorf("hmr %v", e)
	}
	ins, _ := p[len(p)-1]["insert"].([]any)
	if len(ins) != 1 || ins[0].(map[string]any)["name"] != "file://"+filepath.Join(home, "agentrun-stream.mjs") {
		t.Errorf("insert %v", p[len(p)-1])
	}
}

func TestLaunchDefaults(t *testing.T) {
	state := filepath.Join(t.TempDir(), "a #b%c")
	if _, err := New().Launch(adapters.LaunchSpec{Binary: "dsh", Prompt: "hi", StateDir: state}); err != nil {
		t.Fatal(err)
	}
	p := readPatch(t, state)
	llm, _ := entry(p, "llm-deepseek")["config"].(map[string]any)
	if llm["baseURL"] != "https://api.deepseek.com" || llm["apiKeyEnv"] != "DEEPSEEK_API_KEY" || llm["retryPolicy"] != nil {
		t.Errorf("llm-deepseek %v", llm)
	}
	if entry(p, "agent-default-model") != nil || entry(p, "tool-subagent") != nil {
		t.Errorf("no --model and subagents allowed, yet: %v", p)
	}
	ins, _ := p[len(p)-1]["insert"].([]any)
	if name, _ := ins[0].(map[string]any)["name"].(string); !strings.HasPrefix(name, "file:///") || !strings.HasSuffix(name, "/a%20%23b%25c/dsh/agentrun-stream.mjs") {
		t.Errorf("plugin URL %v", name)
	}
}

func TestLaunchRejects(t *testing.T) {
	specs := []adapters.LaunchSpec{
		{Binary: "dsh", Images: []string{"a.png"}},
		{Binary: "dsh", Env: map[string]string{"DEEPSEEK_BASE_URL": "not a url"}},
		{Binary: "dsh", Env: map[string]string{"AGENTRUN_MODEL_RETRIES": "-1"}},
	}
	for _, s := range specs {
		s.StateDir = t.TempDir()
		if _, err := New().Launch(s); err == nil {
			t.Errorf("Launch(%+v): no error", s)
		}
	}
}

// TestTextWithTypeErrorIsNone: content blocks with a field of an
// unexpected type have no text (as when the adapter decoded them with
// encoding/json, which reported the type error), while the line they are
// in keeps what it could decode.
func TestTextWithTypeErrorIsNone(t *testing.T) {
	prompt := `{"agentrun":"event","session":"S1","event":{"type":"user/message","data":{"content":[{"type":"text","text":"fix it"},{"type":"text","text":1}],"source":{"kind":"user"}}}}`
	a := New()
	var got []records.Record
	for _, line := range []string{lineSession, prompt} {
		a.Translate([]byte(line), func(r records.Record) { got = append(got, r) })
	}
	if want := []records.Record{records.Prompt{Text: "", Images: []string{}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("records %+v, want %+v", got, want)
	}
	if a.bashFailed(json.RawMessage(`[{"type":"text","text":"[exit code: 1]"},{"type":2}]`)) {
		t.Error("bashFailed read a marker from blocks with a type error")
	}
}

func TestBashFailed(t *testing.T) {
	for text, want := range map[string]bool{
		"(no output)\n[exit code: 22]":                          true,
		"out\n[timed out after 60000ms]\n[exit code: 124]":      true,
		"[killed by signal: SIGKILL]":                           true,
		"hello\n":                                               false,
		"(no output)":                                           false,
		"[exit code: 3] was printed\nok":                        false,
		"x\n[sandbox: file access denied under read-only mode]": true,
	} {
		raw, _ := json.Marshal([]map[string]string{{"type": "text", "text": text}})
		if got := New().bashFailed(raw); got != want {
			t.Errorf("bashFailed(%q) = %v, want %v", text, got, want)
		}
	}
}
