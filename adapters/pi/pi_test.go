package pi

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

// Hand-written lines in the shape pi 0.73.1 writes (testdata/real has the
// real ones), for what the captures do not cover.
const (
	lineSession    = `{"type":"session","version":3,"id":"S1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`
	lineAgentStart = `{"type":"agent_start"}`
	linePrompt     = `{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"fix it"}],"timestamp":1}}`
	lineCallStart  = `{"type":"message_start","message":{"role":"assistant","content":[],"model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"total":0}},"stopReason":"stop"}}`
	lineReadCall   = `{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"look first"},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"src/x.ts"}}],"model":"m","usage":{"input":12,"output":7,"cacheRead":300,"cacheWrite":0,"totalTokens":319,"cost":{"total":0.5}},"stopReason":"toolUse"}}`
	lineReadStart  = `{"type":"tool_execution_start","toolCallId":"c1","toolName":"read","args":{"path":"src/x.ts"}}`
	lineReadEnd    = `{"type":"tool_execution_end","toolCallId":"c1","toolName":"read","result":{"content":[{"type":"text","text":"ENOENT"}]},"isError":true}`
	lineAnswer     = `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"The file is missing."}],"model":"m","usage":{"input":20,"output":9,"cacheRead":310,"cacheWrite":0,"totalTokens":339,"cost":{"total":0.25}},"stopReason":"stop"}}`
	lineAgentEnd   = `{"type":"agent_end","messages":[]}`
	lineAPIError   = `{"type":"message_end","message":{"role":"assistant","content":[],"model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"total":0}},"stopReason":"error","errorMessage":"429 rate limited"}}`
	lineRetryStart = `{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"429 rate limited"}`
	lineRetryOK    = `{"type":"auto_retry_end","success":true,"attempt":1}`
	lineRetryFail  = `{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"429 rate limited (final)"}`
)

func TestToolErrorTextUsageCost(t *testing.T) {
	raw := strings.Join([]string{lineSession, lineAgentStart, linePrompt, lineCallStart, lineReadCall, lineReadStart, lineReadEnd,
		lineCallStart, lineAnswer, lineAgentEnd}, "\n")
	evs, v := adapterstest.Replay(t, New(), Name, []byte(raw), adapters.Exit{})
	if got, want := adapterstest.Types(evs), "start prompt usage tool_start tool text usage end"; got != want {
		t.Fatalf("types:\n got %s\nwant %s", got, want)
	}
	adapterstest.Check(t, evs)
	if v.Failed {
		t.Errorf("verdict %+v", v)
	}
	tool := eventstest.Find[*events.Tool](evs)
	if tool.Summary != "read: src/x.ts" || tool.Denied || tool.Error == nil || !*tool.Error {
		t.Errorf("tool %+v: a failed read is an error, never a denial", tool)
	}
	u := eventstest.Find[*events.Usage](evs)
	if *u.InputTokens != 12 || *u.CacheReadTokens != 300 || *u.CacheWriteTokens != 0 || *u.OutputTokens != 7 || *u.CostUSD != 0.5 ||
		*u.Model != "m" || *u.ContextTokens != 312 {
		t.Errorf("usage %+v", u)
	}
	end := adapterstest.End(t, evs)
	if *end.Result != "The file is missing." || *end.Usage.CostUSD != 0.75 || *end.Usage.InputTokens != 32 {
		t.Errorf("end result %v usage %+v", end.Result, end.Usage)
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name   string
		lines  []string
		failed bool
		detail string
	}{
		{"retried and recovered", []string{lineAgentStart, linePrompt, lineCallStart, lineAPIError, lineAgentEnd, lineRetryStart,
			lineAgentStart, lineCallStart, lineAnswer, lineAgentEnd, lineRetryOK}, false, ""},
		{"retries exhausted", []string{lineAgentStart, linePrompt, lineCallStart, lineAPIError, lineAgentEnd, lineRetryStart,
			lineAgentStart, lineCallStart, lineAPIError, lineAgentEnd, lineRetryFail}, true, "429 rate limited (final)"},
		{"no retry", []string{lineAgentStart, linePrompt, lineCallStart, lineAPIError, lineAgentEnd}, true, "429 rate limited"},
		{"aborted without a message", []string{lineAgentStart, linePrompt, lineCallStart,
			`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"aborted"}}`, lineAgentEnd},
			true, "pi ended the model call with stopReason aborted"},
		{"no agent_end", []string{lineAgentStart, linePrompt, lineCallStart, lineAnswer}, true, "pi exited without ending its agent loop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, v := adapterstest.Replay(t, New(), Name, []byte(strings.Join(tt.lines, "\n")), adapters.Exit{})
			if v.Failed != tt.failed || v.Detail != tt.detail {
				t.Errorf("verdict %+v, want failed=%v detail %q", v, tt.failed, tt.detail)
			}
			// A failed call's zero usage is no usage: only real calls count.
			for _, e := range evs {
				if u, ok := e.(*events.Usage); ok && *u.InputTokens == 0 {
					t.Errorf("usage event for a failed call: %+v", u)
				}
			}
			if n := strings.Count(adapterstest.Types(evs), "prompt"); n != 1 {
				t.Errorf("%d prompt events", n)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	ok := strings.Join([]string{lineAgentStart, linePrompt, lineCallStart, lineAnswer, lineAgentEnd}, "\n")
	for _, exit := range []adapters.Exit{{Code: 130}, {Code: 1}, {Signaled: true}} {
		if _, v := adapterstest.Replay(t, New(), Name, []byte(ok), exit); !v.Failed || v.Detail != "" {
			t.Errorf("exit %+v: verdict %+v, want failed with no message of pi's", exit, v)
		}
	}
}

func TestPartialTextAtClose(t *testing.T) {
	upd := func(typ, delta string) string {
		return `{"type":"message_update","assistantMessageEvent":{"type":"` + typ + `","contentIndex":0,"delta":"` + delta + `","partial":{"content":[]}},"message":{"role":"assistant","content":[]}}`
	}
	raw := strings.Join([]string{lineAgentStart, linePrompt, lineCallStart, upd("thinking_delta", "hmm"), upd("text_start", ""),
		upd("text_delta", "Once upon"), upd("text_delta", " a time"), upd("text_start", ""), upd("text_delta", "Second")}, "\n")
	evs, _ := adapterstest.Replay(t, New(), Name, []byte(raw), adapters.Exit{Code: 130})
	if end := adapterstest.End(t, evs); end.Result == nil || *end.Result != "Once upon a time\nSecond" {
		t.Errorf("result %v: the text streamed before the interrupt", end.Result)
	}
	// A message that ended leaves nothing owed.
	evs, _ = adapterstest.Replay(t, New(), Name, []byte(raw+"\n"+lineAnswer+"\n"+lineAgentEnd), adapters.Exit{})
	if got := adapterstest.Types(evs); got != "start prompt text usage end" {
		t.Errorf("types %s", got)
	}
}

func TestStripImageRefs(t *testing.T) {
	tests := map[string]string{
		"look\u003cfile name=\"/tmp/agentrun-1/agentrun-images/1.png\"\u003e\u003c/file\u003e\n":                          "look",
		"look<file name=\"/s/agentrun-images/1.png\">[resized]</file>\n<file name=\"/s/agentrun-images/2.jpg\"></file>\n": "look",
		"keep <file name=\"/home/me/x.png\"></file>\n":                                                                    "keep <file name=\"/home/me/x.png\"></file>\n",
		"plain prompt": "plain prompt",
	}
	for in, want := range tests {
		if got := stripImageRefs(in); got != want {
			t.Errorf("stripImageRefs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLaunch(t *testing.T) {
	state := t.TempDir()
	img := filepath.Join(t.TempDir(), "shot.jpg")
	if err := os.WriteFile(img, []byte("jpg"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := New()
	l, err := a.Launch(adapters.LaunchSpec{Binary: "/opt/pi", Prompt: "@notes -v", Model: "qwen3-coder", StateDir: state, Images: []string{img},
		Env: map[string]string{"OPENAI_BASE_URL": "http://gw:9/v1", "AGENTRUN_API_KEY_ENV": "GW_KEY", "AGENTRUN_MODEL_RETRIES": "1",
			CostEnv: "input=1.25, output=10,cache_read=0.125"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "pi")
	want := []string{"/opt/pi", "-p", "--mode", "json", "--provider", "agentrun", "--model", "qwen3-coder", "--no-session", "--offline",
		"@" + filepath.Join(state, adapters.ImageDir, "1.jpg")}
	if !slices.Equal(l.Argv, want) {
		t.Errorf("argv:\n got %q\nwant %q", l.Argv, want)
	}
	wantEnv := []string{"PI_CODING_AGENT_DIR=" + dir, "PI_OFFLINE=1", "PI_TELEMETRY=0", "PI_SKIP_VERSION_CHECK=1"}
	if string(l.Stdin) != "@notes -v" || !l.EchoesPrompt || !slices.Equal(l.Env, wantEnv) {
		t.Errorf("stdin %q echoes %v env %q", l.Stdin, l.EchoesPrompt, l.Env)
	}
	var models struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			API     string `json:"api"`
			APIKey  string `json:"apiKey"`
			Models  []struct {
				ID    string             `json:"id"`
				Cost  map[string]float64 `json:"cost"`
				Input []string           `json:"input"`
			} `json:"models"`
		} `json:"providers"`
	}
	readJSON(t, filepath.Join(dir, "models.json"), &models)
	p := models.Providers["agentrun"]
	if p.BaseURL != "http://gw:9/v1" || p.API != "openai-completions" || p.APIKey != "GW_KEY" || len(p.Models) != 1 || p.Models[0].ID != "qwen3-coder" {
		t.Errorf("models.json provider %+v", p)
	}
	if !slices.Equal(p.Models[0].Input, []string{"text", "image"}) {
		t.Errorf("input %v: with --image the model must take images", p.Models[0].Input)
	}
	if c := p.Models[0].Cost; c["input"] != 1.25 || c["output"] != 10 || c["cacheRead"] != 0.125 || c["cacheWrite"] != 0 || len(c) != 4 {
		t.Errorf("cost %v", c)
	}
	var settings map[string]map[string]any
	readJSON(t, filepath.Join(dir, "settings.json"), &settings)
	r := settings["retry"]
	if r["enabled"] != true || r["maxRetries"] != 1.0 || r["provider"].(map[string]any)["maxRetries"] != 0.0 {
		t.Errorf("settings.json retry %v", r)
	}
	// The prompt event names the caller's image path, not the copy.
	raw := `{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"@notes -v<file name=\"` +
		filepath.Join(state, adapters.ImageDir, "1.jpg") + `\"></file>\n"},{"type":"image","data":"x","mimeType":"image/jpeg"}]}}`
	evs, _ := adapterstest.Replay(t, a, Name, []byte(raw), adapters.Exit{})
	if pr := eventstest.Find[*events.Prompt](evs); pr == nil || pr.Text != "@notes -v" || !slices.Equal(pr.Images, []string{img}) {
		t.Errorf("prompt %+v", pr)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestLaunchDefaults(t *testing.T) {
	state := t.TempDir()
	if _, err := New().Launch(adapters.LaunchSpec{Binary: "pi", Prompt: "hi", Model: "gpt-5", StateDir: state}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(state, "pi", "models.json"))
	if !strings.Contains(string(b), `"baseUrl": "https://api.openai.com/v1"`) || !strings.Contains(string(b), `"apiKey": "OPENAI_API_KEY"`) ||
		strings.Contains(string(b), "cost") || strings.Contains(string(b), "image") {
		t.Errorf("models.json:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(state, "pi", "settings.json")); !os.IsNotExist(err) {
		t.Errorf("settings.json written without AGENTRUN_MODEL_RETRIES: %v", err)
	}
	state = t.TempDir()
	if _, err := New().Launch(adapters.LaunchSpec{Binary: "pi", Model: "gpt-5", StateDir: state, Env: map[string]string{"AGENTRUN_MODEL_RETRIES": "0"}}); err != nil {
		t.Fatal(err)
	}
	var settings map[string]map[string]any
	readJSON(t, filepath.Join(state, "pi", "settings.json"), &settings)
	if settings["retry"]["enabled"] != false {
		t.Errorf("retries 0: %v", settings)
	}
}

func TestLaunchRejects(t *testing.T) {
	specs := []adapters.LaunchSpec{
		{Binary: "pi"}, // no --model
		{Binary: "pi", Model: "m", Env: map[string]string{"OPENAI_BASE_URL": "not a url"}},
		{Binary: "pi", Model: "m", Env: map[string]string{CostEnv: "input=cheap"}},
		{Binary: "pi", Model: "m", Env: map[string]string{CostEnv: "inpt=1"}},
		{Binary: "pi", Model: "m", Env: map[string]string{CostEnv: "input=-1"}},
	}
	for _, s := range specs {
		s.StateDir = t.TempDir()
		if _, err := New().Launch(s); err == nil {
			t.Errorf("Launch(%+v): no error", s)
		}
	}
}

// TestTextDeltasArePartial: the text_delta updates of the real capture
// of an interrupted slow answer become records.PartialText, for the live
// view.
func TestTextDeltasArePartial(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "real", "interrupt.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	a := New()
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		a.Translate([]byte(line), func(r records.Record) {
			if p, ok := r.(records.PartialText); ok {
				b.WriteString(p.Text)
			}
		})
	}
	if s := b.String(); !strings.HasPrefix(s, "slow slow ") || strings.Trim(s, "slow ") != "" {
		t.Errorf("partial text %q", s)
	}
}

// TestUnknownCostIsNull: pi's cost of 0 for a call that used tokens means
// it knows no prices: unknown (null), not free; a real cost stays.
func TestUnknownCostIsNull(t *testing.T) {
	for _, tt := range []struct {
		line string
		want *float64
	}{
		{`{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0}}`, nil},
		{`{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.25}}`, events.Float64(0.25)},
		{`{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"total":0}}`, events.Float64(0)},
	} {
		var u wireUsage
		if err := json.Unmarshal([]byte(tt.line), &u); err != nil {
			t.Fatal(err)
		}
		got := u.counts().CostUSD
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: cost %v, want %v", tt.line, got, tt.want)
		}
	}
}

// TestUpdateWithTypeErrorIsDropped: a message_update with a field of an
// unexpected type is dropped whole (as when the adapter decoded it with
// encoding/json, which reported the type error), while other lines keep
// what they could decode.
func TestUpdateWithTypeErrorIsDropped(t *testing.T) {
	bad := `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"lost","type":2}}`
	good := `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"kept"}}`
	a := New()
	var got []records.Record
	for _, line := range []string{lineAgentStart, lineCallStart, bad, good} {
		a.Translate([]byte(line), func(r records.Record) { got = append(got, r) })
	}
	a.Close(func(r records.Record) { got = append(got, r) })
	want := []records.Record{records.CallStart{CallID: "pi-call-1"}, records.PartialText{Text: "kept"}, records.Text{Text: "kept"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records %+v, want %+v", got, want)
	}
}
