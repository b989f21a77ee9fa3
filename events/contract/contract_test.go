package contract

import (
	"os"
	"strings"
	"testing"
)

const (
	start     = `{"schema":1,"type":"start","time":"2026-10-04T13:00:00.000Z","runtime":"claude-code","sandbox":"bubblewrap","network":{"mode":"none","allow":[],"enforced":true},"deny_read":[],"model":null,"cwd":"/work","argv":["claude"],"env":[]}`
	prompt    = `{"schema":1,"type":"prompt","time":"2026-10-04T13:00:00.100Z","text":"hi","images":[]}`
	subStart  = `{"schema":1,"type":"subagent_start","time":"2026-10-04T13:00:01.000Z","id":"s1","parent":null,"number":1,"kind":"Explore","model":null,"description":"look"}`
	subEnd    = `{"schema":1,"type":"subagent_end","time":"2026-10-04T13:00:02.000Z","id":"s1","status":"finished","duration_ms":1000,"usage":{"input_tokens":null,"output_tokens":null,"cache_read_tokens":null,"cache_write_tokens":null,"cost_usd":null,"by_model":{}}}`
	toolStart = `{"schema":1,"type":"tool_start","time":"2026-10-04T13:00:01.500Z","id":"t1","parent":"s1","name":"Grep","summary":"Grep: x"}`
	tool      = `{"schema":1,"type":"tool","time":"2026-10-04T13:00:01.600Z","id":"t1","parent":"s1","name":"Grep","summary":"Grep: x","denied":false,"error":false}`
	usage     = `{"schema":1,"type":"usage","time":"2026-10-04T13:00:01.700Z","parent":null,"model":"m","input_tokens":1,"output_tokens":2,"cache_read_tokens":3,"cache_write_tokens":4,"cost_usd":null,"context_tokens":8}`
	text      = `{"schema":1,"type":"text","time":"2026-10-04T13:00:02.500Z","parent":null,"text":"done"}`
	end       = `{"schema":1,"type":"end","time":"2026-10-04T13:00:03.000Z","status":"finished","exit_code":0,"detail":"","duration_ms":3000,"usage":{"input_tokens":null,"output_tokens":null,"cache_read_tokens":null,"cache_write_tokens":null,"cost_usd":null,"by_model":{}},"result":"done","session_id":null}`
	meter     = `,"meter":{"calls":2,"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"matches":false,"unmetered":1}}`
	rejected  = `{"schema":1,"type":"end","time":"2026-10-04T13:00:00.003Z","status":"rejected","exit_code":null,"detail":"--runtime: unknown runtime","duration_ms":3,"usage":{"input_tokens":null,"output_tokens":null,"cache_read_tokens":null,"cache_write_tokens":null,"cost_usd":null,"by_model":{}},"result":null,"session_id":null}`
)

func stream(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

func TestCheck(t *testing.T) {
	good := []string{start, prompt, subStart, toolStart, usage, tool, subEnd, text, end}
	tests := []struct {
		name  string
		lines []string
		exact bool
		want  []string // one substring per expected problem, in order; none = valid
	}{
		{name: "good", lines: good},
		{name: "good, exact", lines: good, exact: true},
		{name: "rejected alone", lines: []string{rejected}},
		{name: "start with a trace id", lines: []string{strings.Replace(start, `"env":[]}`, `"env":[],"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`, 1), end}},
		{name: "trace id not hex", lines: []string{strings.Replace(start, `"env":[]}`, `"env":[],"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736"}`, 1), end},
			want: []string{"line 1: start /trace_id"}},
		{name: "trace id before credentials", lines: []string{strings.Replace(start, `"env":[]}`, `"env":[],"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","credentials":["K"]}`, 1), end},
			want: []string{"line 1: start fields"}},
		{name: "empty", lines: nil, want: []string{"stream: empty"}},
		{name: "no end", lines: []string{start, prompt}, want: []string{"line 2: the last event is prompt, not end"}},
		{name: "no start", lines: []string{prompt, end}, want: []string{"line 1: the first event is prompt, not start"}},
		{name: "start twice", lines: []string{start, start, end}, want: []string{"line 2: start is not the first event"}},
		{name: "end not last", lines: []string{start, end, text, end}, want: []string{"line 2: end is not the last event (line 3 follows it)"}},
		{name: "rejected with others", lines: []string{start, rejected}, want: []string{"line 2: a rejected run has no events but its end"}},
		{name: "tool without tool_start", lines: []string{start, subStart, tool, subEnd, end}, want: []string{"line 3: tool t1 without its tool_start"}},
		{name: "tool_start without tool", lines: []string{start, subStart, toolStart, subEnd, end}, want: []string{"line 3: tool_start t1 has no tool before end"}},
		{name: "tool twice", lines: []string{start, subStart, toolStart, tool, tool, subEnd, end}, want: []string{"line 5: tool t1 twice"}},
		{name: "tool changes its summary", lines: []string{start, subStart, toolStart, strings.Replace(tool, "Grep: x", "Grep: y", 1), subEnd, end},
			want: []string{"line 4: tool t1 does not repeat its tool_start's parent, name and summary"}},
		{name: "parent not started", lines: []string{start, toolStart, tool, end},
			want: []string{"line 2: tool_start parent \"s1\" is not a started subagent"}},
		{name: "subagent never ends", lines: []string{start, subStart, end}, want: []string{"line 2: subagent s1 has no subagent_end before end"}},
		{name: "subagent numbered wrong", lines: []string{start, strings.Replace(subStart, `"number":1`, `"number":2`, 1), subEnd, end},
			want: []string{"line 2: subagent s1 number 2, want 1"}},
		{name: "subagent_end without start", lines: []string{start, subEnd, end}, want: []string{"line 2: subagent_end s1 without a start or twice"}},
		{name: "context is not the sum", lines: []string{start, strings.Replace(usage, `"context_tokens":8`, `"context_tokens":10`, 1), end},
			want: []string{"line 2: context_tokens 10 is not input_tokens + cache_read_tokens + cache_write_tokens"}},
		{name: "schema violation", lines: []string{start, strings.Replace(text, `"parent":null`, `"parent":7`, 1), end},
			want: []string{"line 2: text /parent: got number, want"}},
		{name: "not JSON", lines: []string{start, `{"schema":1,`, end}, want: []string{"line 2: "}},
		{name: "empty line", lines: []string{start, "", end}, want: []string{"line 2: empty line"}},
		{name: "fields reordered", lines: []string{start, `{"schema":1,"type":"text","time":"2026-10-04T13:00:02.500Z","text":"done","parent":null}`, end},
			want: []string{"line 2: text fields [schema type time text parent], want [schema type time parent text]"}},
		{name: "usage fields reordered", lines: []string{start, strings.Replace(end, `"input_tokens":null,"output_tokens":null`, `"output_tokens":null,"input_tokens":null`, 1)},
			want: []string{"line 2: usage fields"}},
		{name: "meter", lines: []string{start, strings.TrimSuffix(end, "}") + meter}, exact: true},
		{name: "meter without unmetered", lines: []string{start, strings.TrimSuffix(end, "}") + strings.Replace(meter, `,"unmetered":1`, ``, 1)}, exact: true},
		{name: "meter fields reordered", lines: []string{start, strings.TrimSuffix(end, "}") + strings.Replace(meter, `"matches":false,"unmetered":1`, `"unmetered":1,"matches":false`, 1)},
			want: []string{"line 2: meter fields [calls input_tokens output_tokens cache_read_tokens cache_write_tokens unmetered matches]"}},
		{name: "matches with calls unmetered", lines: []string{start, strings.TrimSuffix(end, "}") + strings.Replace(meter, `"matches":false`, `"matches":true`, 1)},
			want: []string{"line 2: end /meter/matches"}},
		{name: "impossible time", lines: []string{start, strings.Replace(text, "2026-10-04", "2026-13-04", 1), end},
			want: []string{"line 2: time \"2026-13-04T13:00:02.500Z\" is not RFC 3339 UTC with milliseconds"}},
		// What schema 1 may add passes, except in Exact mode (agentrun's own streams).
		{name: "added field", lines: []string{start, strings.Replace(text, `"text":"done"`, `"text":"done","lang":"en"`, 1), end}},
		{name: "added field, exact", lines: []string{start, strings.Replace(text, `"text":"done"`, `"text":"done","lang":"en"`, 1), end}, exact: true,
			want: []string{"line 2: text fields [schema type time parent text lang]"}},
		{name: "added event type", lines: []string{start, `{"schema":1,"type":"checkpoint","time":"2026-10-04T13:00:02.500Z"}`, end}},
		{name: "added event type, exact", lines: []string{start, `{"schema":1,"type":"checkpoint","time":"2026-10-04T13:00:02.500Z"}`, end}, exact: true,
			want: []string{"line 2: unknown event type \"checkpoint\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []byte
			if tt.lines != nil {
				in = stream(tt.lines...)
			}
			got := Check(in, Options{Exact: tt.exact})
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %q, want %d %q", len(got), got, len(tt.want), tt.want)
			}
			for i, p := range got {
				if !strings.Contains(p.Error(), tt.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p.Error(), tt.want[i])
				}
			}
		})
	}
}

func TestSchemaOnly(t *testing.T) {
	// Only the lines themselves: a stream of network events alone (what
	// `agentrun sandbox --events` writes) is fine, a bad line is not.
	net := `{"schema":1,"type":"network","time":"2026-10-04T13:01:20.000Z","host":"evil.example","port":443,"allowed":false,"reason":"not_allowed"}`
	if got := Check(stream(net, net), Options{SchemaOnly: true}); got != nil {
		t.Errorf("schema only: %q", got)
	}
	bad := strings.Replace(net, `"port":443`, `"port":"443"`, 1)
	if got := Check(stream(net, bad), Options{SchemaOnly: true}); len(got) != 1 || got[0].Line != 2 {
		t.Errorf("schema only, bad port: %q", got)
	}
}

// TestGoldens: the text format's golden streams that were written as
// agentrun writes them keep the contract (the others break it on purpose,
// to test the renderer's tolerance).
func TestGoldens(t *testing.T) {
	for _, name := range []string{"seed-example", "long-text", "session", "rejected", "failed-detail"} {
		b, err := os.ReadFile("../format/text/testdata/" + name + ".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if got := Check(b, Options{Exact: true}); got != nil {
			t.Errorf("%s: %q", name, got)
		}
	}
}

func TestCheckReader(t *testing.T) {
	got, err := CheckReader(strings.NewReader(string(stream(start, prompt, text, end))), Options{Exact: true})
	if err != nil || got != nil {
		t.Errorf("CheckReader: %q, %v", got, err)
	}
	// No newline after the last line.
	got, err = CheckReader(strings.NewReader(start+"\n"+text), Options{})
	if err != nil || len(got) != 1 || got[0].Line != 2 {
		t.Errorf("CheckReader without a final newline: %q, %v", got, err)
	}
}
