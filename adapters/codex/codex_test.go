package codex

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
)

// Hand-written lines in the shape codex 0.171.0 writes (testdata/real has
// the real ones), for what the captures do not cover.
const (
	lineThread    = `{"type":"thread.started","thread_id":"T1"}`
	lineTurn      = `{"type":"turn.started"}`
	lineCmdStart  = `{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'cargo test -p \"x y\"'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`
	lineCmdFailed = `{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'cargo test -p \"x y\"'","aggregated_output":"boom","exit_code":101,"status":"failed"}}`
	linePatch     = `{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"src/a.rs","kind":"update"},{"path":"src/b.rs","kind":"add"}],"status":"completed"}}`
	lineMCPStart  = `{"type":"item.started","item":{"id":"item_2","type":"mcp_tool_call","server":"github","tool":"search_issues","arguments":{"q":"bug"},"status":"in_progress"}}`
	lineMCPEnd    = `{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"github","tool":"search_issues","arguments":{"q":"bug"},"error":{"message":"rate limited"},"status":"failed"}}`
	lineSearch    = `{"type":"item.completed","item":{"id":"item_3","type":"web_search","query":"rust lifetimes"}}`
	lineWarning   = `{"type":"item.completed","item":{"id":"item_4","type":"error","message":"Model metadata for ` + "`x`" + ` not found."}}`
	lineTodo      = `{"type":"item.completed","item":{"id":"item_5","type":"todo_list","items":[{"text":"a","completed":false}]}}`
	lineMessage   = `{"type":"item.completed","item":{"id":"item_6","type":"agent_message","text":"All green."}}`
	lineDone      = `{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"cache_write_input_tokens":0,"output_tokens":122,"reasoning_output_tokens":64}}`
)

func TestItemsAndUsage(t *testing.T) {
	raw := strings.Join([]string{lineThread, lineTurn, lineCmdStart, lineCmdFailed, linePatch, lineMCPStart, lineMCPEnd,
		lineSearch, lineWarning, lineTodo, lineMessage, lineDone}, "\n")
	a := New()
	a.Replay(adapters.LaunchSpec{Model: "gpt-5.5"})
	evs, v := adapterstest.Replay(t, a, Name, []byte(raw), adapters.Exit{})
	want := "start tool_start tool tool_start tool tool_start tool tool_start tool text usage end"
	if got := adapterstest.Types(evs); got != want {
		t.Fatalf("types:\n got %s\nwant %s", got, want)
	}
	adapterstest.Check(t, evs)
	if v.Failed {
		t.Errorf("verdict %+v: warnings and a failed tool do not fail the run", v)
	}
	var tools []string
	for _, e := range evs {
		if tl, ok := e.(*events.Tool); ok {
			errv := "null"
			if tl.Error != nil {
				errv = map[bool]string{true: "error", false: "ok"}[*tl.Error]
			}
			tools = append(tools, tl.Summary+" ("+errv+")")
			if tl.Denied {
				t.Errorf("%s denied", tl.ID)
			}
		}
	}
	wantTools := []string{
		`command_execution: cargo test -p "x y" (error)`,
		"file_change: update src/a.rs, add src/b.rs (ok)",
		"mcp_tool_call: github/search_issues (error)",
		"web_search: rust lifetimes (null)",
	}
	if !slices.Equal(tools, wantTools) {
		t.Errorf("tools:\n got %q\nwant %q", tools, wantTools)
	}
	u := eventstest.Find[*events.Usage](evs)
	// codex's input_tokens include the cached tokens; the unified input
	// does not.
	if *u.InputTokens != 24763-24448 || *u.CacheReadTokens != 24448 || *u.CacheWriteTokens != 0 || *u.OutputTokens != 122 ||
		*u.ContextTokens != 24763 || u.CostUSD != nil || *u.Model != "gpt-5.5" || u.Parent != nil {
		t.Errorf("usage = %s", show(u))
	}
	end := adapterstest.End(t, evs)
	if *end.Result != "All green." || *end.Usage.InputTokens != 315 || end.Usage.CostUSD != nil {
		t.Errorf("end = %s", show(end))
	}
}

func show(e events.Event) string {
	b, _ := events.Marshal(e)
	return string(b)
}

func TestCountsWithoutCache(t *testing.T) {
	in, out := int64(50), int64(5)
	c := counts(&wireUsage{InputTokens: &in, OutputTokens: &out})
	if *c.InputTokens != 50 || c.CacheReadTokens != nil || c.CacheWriteTokens != nil || c.Context() != nil {
		t.Errorf("counts = %+v: without a cached count the input stays, and unreported fields are null", c)
	}
}

func TestNoModelGivesNull(t *testing.T) {
	evs, _ := adapterstest.Replay(t, New(), Name, []byte(lineTurn+"\n"+lineDone), adapters.Exit{})
	if u := eventstest.Find[*events.Usage](evs); u == nil || u.Model != nil {
		t.Errorf("usage %v: without --model the model is null", u)
	}
}

func TestDeclinedCommandIsDenied(t *testing.T) {
	raw := lineTurn + "\n" + `{"type":"item.completed","item":{"id":"c","type":"command_execution","command":"rm -rf /","aggregated_output":"","exit_code":null,"status":"declined"}}` + "\n" + lineDone
	evs, _ := adapterstest.Replay(t, New(), Name, []byte(raw), adapters.Exit{})
	tool := eventstest.Find[*events.Tool](evs)
	if tool == nil || !tool.Denied || tool.Error == nil || *tool.Error || tool.Summary != "command_execution: rm -rf /" {
		t.Errorf("tool %+v", tool)
	}
}

func TestVerdicts(t *testing.T) {
	failed := `{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}`
	errLine := `{"type":"error","message":"stream disconnected before completion"}`
	tests := []struct {
		name   string
		raw    string
		exit   adapters.Exit
		failed bool
		detail string
	}{
		{"completed", lineTurn + "\n" + lineDone, adapters.Exit{}, false, ""},
		{"turn failed", lineTurn + "\n" + errLine + "\n" + failed, adapters.Exit{Code: 1}, true, "unexpected status 401 Unauthorized"},
		{"turn failed, exit 0", lineTurn + "\n" + failed, adapters.Exit{}, true, "unexpected status 401 Unauthorized"},
		{"exit 1 after an error", lineTurn + "\n" + errLine, adapters.Exit{Code: 1}, true, "stream disconnected before completion"},
		// SIGINT: exit 1, no closing event, no message: the runner falls
		// back to stderr.
		{"interrupted", lineTurn, adapters.Exit{Code: 1}, true, ""},
		{"killed", lineTurn, adapters.Exit{Signaled: true}, true, ""},
		{"exit 0 without a turn", lineThread, adapters.Exit{}, true, "codex exited without completing the turn"},
		{"a second turn resets", lineTurn + "\n" + failed + "\n" + lineTurn + "\n" + lineDone, adapters.Exit{}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, v := adapterstest.Replay(t, New(), Name, []byte(tt.raw), tt.exit)
			if v.Failed != tt.failed || v.Detail != tt.detail {
				t.Errorf("verdict %+v, want failed=%v detail %q", v, tt.failed, tt.detail)
			}
		})
	}
}

func TestUnwrapShell(t *testing.T) {
	tests := map[string]string{
		`/bin/bash -lc 'echo hello > hello.txt'`:     "echo hello > hello.txt",
		`/bin/bash -lc ls`:                           "ls",
		`bash -c 'it'"'"'s here'`:                    "it's here",
		`/bin/zsh -lc "echo \"hi\" \$HOME"`:          `echo "hi" $HOME`,
		`/usr/bin/sh -c 'a && b'`:                    "a && b",
		`bash -lc echo hi`:                           "bash -lc echo hi", // two words after -lc: not a wrapper
		`/bin/bash -lc 'unclosed`:                    "/bin/bash -lc 'unclosed",
		`python3 -c 'print(1)'`:                      "python3 -c 'print(1)'",
		`/bin/bash -x 'echo'`:                        "/bin/bash -x 'echo'",
		"/bin/bash -lc 'line one\nline two'":         "line one\nline two",
		`/bin/bash -lc a\ b`:                         "a b",
		`/bin/bash -lc "multi \` + "\n" + `line"`:    "multi line",
		`/bin/bash   -lc   'spaces between words'  `: "spaces between words",
	}
	for in, want := range tests {
		if got := unwrapShell(in); got != want {
			t.Errorf("unwrapShell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLaunch(t *testing.T) {
	state := t.TempDir()
	img := filepath.Join(t.TempDir(), "shot.PNG")
	if err := os.WriteFile(img, []byte("png"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := adapters.LaunchSpec{Binary: "/opt/codex", Prompt: "-h fix it", Model: "gpt-5.5", Cwd: "/work", StateDir: state,
		Images: []string{img}, NoSubagents: true,
		Env: map[string]string{"OPENAI_BASE_URL": "http://gw.local:8080/v1", "AGENTRUN_API_KEY_ENV": "GW_KEY", "AGENTRUN_MODEL_RETRIES": "2"}}
	a := New()
	l, err := a.Launch(spec)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(state, "codex")
	copyPath := filepath.Join(state, adapters.ImageDir, "1.png")
	want := []string{"/opt/codex", "exec", "--json", "--skip-git-repo-check", "--ephemeral", "--sandbox", "danger-full-access",
		"-c", "analytics.enabled=false", "-c", "otel.metrics_exporter=none", "--disable", "plugins", "--disable", "apps",
		"--disable", "multi_agent", "--model", "gpt-5.5", "--image", copyPath, "--", "-"}
	if !slices.Equal(l.Argv, want) {
		t.Errorf("argv:\n got %q\nwant %q", l.Argv, want)
	}
	if string(l.Stdin) != "-h fix it" || l.EchoesPrompt || !slices.Equal(l.Env, []string{"CODEX_HOME=" + home}) {
		t.Errorf("stdin %q echoes %v env %v", l.Stdin, l.EchoesPrompt, l.Env)
	}
	if b, err := os.ReadFile(copyPath); err != nil || string(b) != "png" {
		t.Errorf("image copy: %q %v", b, err)
	}
	cfg, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := `# Written by agentrun for one run.
model_provider = "agentrun"
approval_policy = "never"

[model_providers.agentrun]
name = "agentrun"
base_url = "http://gw.local:8080/v1"
env_key = "GW_KEY"
wire_api = "responses"
request_max_retries = 2
stream_max_retries = 2
`
	if string(cfg) != wantCfg {
		t.Errorf("config.toml:\n%s\nwant:\n%s", cfg, wantCfg)
	}
	// Usage events carry the --model value.
	evs, _ := adapterstest.Replay(t, a, Name, []byte(lineTurn+"\n"+lineDone), adapters.Exit{})
	if u := eventstest.Find[*events.Usage](evs); u == nil || u.Model == nil || *u.Model != "gpt-5.5" {
		t.Errorf("usage %v", u)
	}
}

func TestLaunchDefaults(t *testing.T) {
	state := t.TempDir()
	l, err := New().Launch(adapters.LaunchSpec{Binary: "codex", Prompt: "hi", StateDir: state, Env: map[string]string{"PATH": "/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(l.Argv, "--model") || slices.Contains(l.Argv, "multi_agent") {
		t.Errorf("argv %q", l.Argv)
	}
	cfg, _ := os.ReadFile(filepath.Join(state, "codex", "config.toml"))
	if !strings.Contains(string(cfg), `base_url = "https://api.openai.com/v1"`) || !strings.Contains(string(cfg), `env_key = "OPENAI_API_KEY"`) ||
		strings.Contains(string(cfg), "retries") {
		t.Errorf("config.toml:\n%s", cfg)
	}
}

func TestLaunchRejects(t *testing.T) {
	for _, env := range []map[string]string{
		{"OPENAI_BASE_URL": "gw.local:8080"},
		{"OPENAI_BASE_URL": "ftp://gw.local"},
		{"AGENTRUN_API_KEY_ENV": "MY-KEY"},
		{"AGENTRUN_MODEL_RETRIES": "-1"},
		{"AGENTRUN_MODEL_RETRIES": "many"},
	} {
		if _, err := New().Launch(adapters.LaunchSpec{Binary: "codex", StateDir: t.TempDir(), Env: env}); err == nil {
			t.Errorf("Launch with %v: no error", env)
		}
	}
	if _, err := New().Launch(adapters.LaunchSpec{Binary: "codex", StateDir: t.TempDir(), Images: []string{"notes.txt"}}); err == nil {
		t.Error("a non-image --image was accepted")
	}
}

// TestTOMLQuoting: a base URL with characters TOML must escape stays one
// string.
func TestTOMLQuoting(t *testing.T) {
	if got := tomlString("http://h/v1?a=\"b\"&c=\\"); got != `"http://h/v1?a=\"b\"&c=\\"` {
		t.Errorf("tomlString = %s", got)
	}
}
