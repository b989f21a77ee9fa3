package schema

import (
	"strings"
	"testing"
)

// valid holds one valid event of each type, as agentrun writes them.
var valid = map[string]string{
	"start":          `{"schema":1,"type":"start","time":"2026-10-04T13:00:00.000Z","runtime":"claude-code","sandbox":"bubblewrap","network":{"mode":"custom","allow":["api.anthropic.com"],"enforced":true},"deny_read":["/home/me/.ssh"],"model":null,"cwd":"/home/me/repo","argv":["/usr/local/bin/claude","-p"],"env":["GH_TOKEN"]}`,
	"prompt":         `{"schema":1,"type":"prompt","time":"2026-10-04T13:00:00.850Z","text":"fix it","images":[]}`,
	"tool_start":     `{"schema":1,"type":"tool_start","time":"2026-10-04T13:00:03.900Z","id":"toolu_02","parent":"toolu_01","name":"Grep","summary":"Grep: parse_line"}`,
	"tool":           `{"schema":1,"type":"tool","time":"2026-10-04T13:00:04.410Z","id":"toolu_02","parent":null,"name":"Grep","summary":"Grep: parse_line","denied":false,"error":null}`,
	"text":           `{"schema":1,"type":"text","time":"2026-10-04T13:00:31.100Z","parent":null,"text":"done\nreally"}`,
	"usage":          `{"schema":1,"type":"usage","time":"2026-10-04T13:00:05.002Z","parent":"toolu_01","model":"claude-haiku-4-5","input_tokens":3120,"output_tokens":85,"cache_read_tokens":9800,"cache_write_tokens":1200,"cost_usd":null,"context_tokens":14120}`,
	"subagent_start": `{"schema":1,"type":"subagent_start","time":"2026-10-04T13:00:03.120Z","id":"toolu_01","parent":null,"number":1,"kind":"Explore","model":"haiku","description":"find callers"}`,
	"subagent_end":   `{"schema":1,"type":"subagent_end","time":"2026-10-04T13:00:15.530Z","id":"toolu_01","status":"failed","duration_ms":12400,"usage":{"input_tokens":null,"output_tokens":null,"cache_read_tokens":null,"cache_write_tokens":null,"cost_usd":null,"by_model":{}}}`,
	"network":        `{"schema":1,"type":"network","time":"2026-10-04T13:01:20.000Z","host":"evil.example","port":443,"allowed":false,"reason":"not_allowed"}`,
	"end":            `{"schema":1,"type":"end","time":"2026-10-04T13:00:31.250Z","status":"finished","exit_code":0,"detail":"","duration_ms":31250,"usage":{"input_tokens":18234,"output_tokens":912,"cache_read_tokens":42000,"cache_write_tokens":5100,"cost_usd":0.0436916,"by_model":{"claude-sonnet-5-5":{"input_tokens":18234,"output_tokens":912,"cache_read_tokens":42000,"cache_write_tokens":5100,"cost_usd":0.0436916}}},"result":"done","session_id":null}`,
}

func TestValidEvents(t *testing.T) {
	for typ, line := range valid {
		if errs := Validate([]byte(line)); errs != nil {
			t.Errorf("%s: %v", typ, errs)
		}
	}
}

// TestAdditions: fields and event types added within schema 1 are allowed,
// and a reason the schema does not list is still a refusal's reason.
func TestAdditions(t *testing.T) {
	for name, line := range map[string]string{
		"new field":      strings.Replace(valid["tool"], `"error":null`, `"error":null,"duration_ms":5`, 1),
		"new nested":     strings.Replace(valid["start"], `"enforced":true`, `"enforced":true,"dns":"proxy"`, 1),
		"new event type": `{"schema":1,"type":"checkpoint","time":"2026-10-04T13:00:31.250Z","anything":[1,2]}`,
		"new reason":     strings.Replace(valid["network"], `"not_allowed"`, `"rate_limited"`, 1),
		"unresolvable":   strings.Replace(valid["network"], `"not_allowed"`, `"unresolvable"`, 1),
		"summary":        strings.Replace(valid["network"], `"not_allowed"}`, `"not_allowed","suppressed":7}`, 1),
		"unmetered":      strings.Replace(valid["network"], `"not_allowed"`, `"unmetered"`, 1),
		// The contract's other sandboxes, which another implementation
		// writes (agentrun writes bubblewrap and none only).
		"seatbelt": strings.Replace(valid["start"], `"bubblewrap"`, `"seatbelt"`, 1),
		"codex":    strings.Replace(valid["start"], `"bubblewrap"`, `"codex"`, 1),
		"meter":    strings.Replace(valid["end"], `"session_id":null}`, `"session_id":null,"meter":{"calls":1,"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"matches":false,"unmetered":2}}`, 1),
	} {
		if errs := Validate([]byte(line)); errs != nil {
			t.Errorf("%s: %v", name, errs)
		}
	}
}

// TestRejects proves the schema is not vacuous: each broken event fails, with
// a message that names the field.
func TestRejects(t *testing.T) {
	tests := []struct {
		name, typ, old, new string
		want                string // in one of the messages
	}{
		{"wrong schema", "text", `"schema":1`, `"schema":2`, "/schema"},
		{"schema as string", "text", `"schema":1`, `"schema":"1"`, "/schema"},
		{"missing time", "text", `"time":"2026-10-04T13:00:31.100Z",`, ``, "missing property 'time'"},
		{"time without milliseconds", "text", `13:00:31.100Z`, `13:00:31Z`, "/time"},
		{"time not UTC", "text", `13:00:31.100Z`, `13:00:31.100+02:00`, "/time"},
		{"missing field", "tool", `"denied":false,`, ``, "missing property 'denied'"},
		{"absent instead of null", "usage", `"cost_usd":null,`, ``, "missing property 'cost_usd'"},
		{"wrong type", "tool", `"denied":false`, `"denied":"no"`, "/denied"},
		{"tokens not integer", "usage", `"input_tokens":3120`, `"input_tokens":3120.5`, "/input_tokens"},
		{"bad runtime", "start", `"claude-code"`, `"gemini"`, "/runtime"},
		{"bad sandbox", "start", `"bubblewrap"`, `"firejail"`, "/sandbox"},
		{"bad mode", "start", `"mode":"custom"`, `"mode":"some"`, "/network/mode"},
		{"custom without hosts", "start", `"allow":["api.anthropic.com"]`, `"allow":[]`, "/network/allow"},
		{"full with hosts", "start", `"mode":"custom"`, `"mode":"full"`, "/network/allow"},
		{"not enforced in the sandbox", "start", `"enforced":true`, `"enforced":false`, "/network/enforced"},
		{"relative cwd", "start", `"/home/me/repo"`, `"repo"`, "/cwd"},
		{"empty model", "start", `"model":null`, `"model":""`, "/model"},
		{"bad end status", "end", `"finished"`, `"done"`, "/status"},
		{"finished with detail", "end", `"detail":""`, `"detail":"x"`, "/detail"},
		{"failed without detail", "end", `"finished"`, `"failed"`, "/detail"},
		{"bad subagent status", "subagent_end", `"failed"`, `"timeout"`, "/status"},
		{"empty by_model with a total", "subagent_end", `"input_tokens":null`, `"input_tokens":5`, "/usage/input_tokens"},
		{"by_model entry incomplete", "end", `"cache_write_tokens":5100,"cost_usd":0.0436916}}`, `"cache_write_tokens":5100}}`, "/usage/by_model/claude-sonnet-5-5"},
		{"denied with error", "tool", `"denied":false,"error":null`, `"denied":true,"error":true`, "/error"},
		{"summary on two lines", "tool", `"summary":"Grep: parse_line"`, `"summary":"Grep:\nparse_line"`, "/summary"},
		{"summary too long", "tool_start", `"summary":"Grep: parse_line"`, `"summary":"` + strings.Repeat("x", 121) + `"`, "/summary"},
		{"context without its parts", "usage", `"cache_read_tokens":9800`, `"cache_read_tokens":null`, "/context_tokens"},
		{"context missing", "usage", `"context_tokens":14120`, `"context_tokens":null`, "/context_tokens"},
		{"number zero", "subagent_start", `"number":1`, `"number":0`, "/number"},
		{"empty parent", "text", `"parent":null`, `"parent":""`, "/parent"},
		{"allowed with a reason", "network", `"allowed":false`, `"allowed":true`, "/reason"},
		{"refused without a reason", "network", `"reason":"not_allowed"`, `"reason":null`, "/reason"},
		{"summary of none", "network", `"not_allowed"}`, `"not_allowed","suppressed":0}`, "/suppressed"},
		{"unmetered none", "end", `"session_id":null}`, `"session_id":null,"meter":{"calls":1,"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"matches":false,"unmetered":0}}`, "/meter/unmetered"},
		{"matches with calls unmetered", "end", `"session_id":null}`, `"session_id":null,"meter":{"calls":1,"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"matches":true,"unmetered":2}}`, "/meter/matches"},
		{"port out of range", "network", `"port":443`, `"port":70000`, "/port"},
		{"rejected with an exit code", "end", `"status":"finished","exit_code":0,"detail":""`, `"status":"rejected","exit_code":0,"detail":"bad flag"`, "/exit_code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := strings.Replace(valid[tt.typ], tt.old, tt.new, 1)
			if line == valid[tt.typ] {
				t.Fatalf("the edit %q → %q changed nothing", tt.old, tt.new)
			}
			errs := Validate([]byte(line))
			if errs == nil {
				t.Fatalf("accepted: %s", line)
			}
			if !strings.Contains(strings.Join(errs, "\n"), tt.want) {
				t.Errorf("messages %q do not mention %q", errs, tt.want)
			}
		})
	}
}

func TestNotJSON(t *testing.T) {
	if errs := Validate([]byte(`{"schema":1,`)); len(errs) != 1 || !strings.HasPrefix(errs[0], "not JSON") {
		t.Errorf("got %q", errs)
	}
	if errs := Validate([]byte(`[1]`)); errs == nil {
		t.Error("an array is not an event")
	}
}
