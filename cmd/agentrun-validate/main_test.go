package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/agentrun-dev/agentrun/adapters/all"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/runner"
)

// translated is the stream `agentrun translate` gives for a real capture of
// an adapter's testdata/real.
func translated(t *testing.T, runtime, capture string) string {
	t.Helper()
	dir := map[string]string{"claude-code": "claudecode", "codex": "codex", "pi": "pi"}[runtime]
	raw, err := os.ReadFile(filepath.Join("..", "..", "adapters", dir, "testdata", "real", capture+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := runner.Translate(runner.TranslateOptions{Runtime: runtime, Model: "gpt-5.5"}, bytes.NewReader(raw), format.NewJSONL(&out), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "format", "text", "testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestValidate(t *testing.T) {
	example := golden(t, "seed-example")
	lines := strings.SplitAfter(example, "\n")
	subagent := translated(t, "claude-code", "subagent")
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout []string // one substring per output line
	}{
		{name: "documented example", stdin: example, code: 0},
		{name: "real claude-code capture with a subagent", stdin: subagent, code: 0},
		{name: "real codex capture", stdin: translated(t, "codex", "parallel"), code: 0},
		{name: "real pi capture", stdin: translated(t, "pi", "tool"), code: 0},
		{name: "rejected run", stdin: golden(t, "rejected"), code: 0},
		{name: "cut before end", stdin: strings.Join(lines[:5], ""), code: 1,
			stdout: []string{"line 3: subagent toolu_01 has no subagent_end before end", "line 5: the last event is tool, not end"}},
		{name: "bad field", stdin: example + strings.Replace(lines[len(lines)-2], `"status":"finished"`, `"status":"ok"`, 1), code: 1,
			stdout: []string{"line 11: end is not the last event (line 12 follows it)", "line 12: end /status: value must be one of"}},
		{name: "renderer-only golden", stdin: golden(t, "tools"), code: 1, stdout: []string{"line 9: tool t4 without its tool_start"}},
		{name: "schema only skips the stream rules", args: []string{"--schema-only"}, stdin: golden(t, "tools"), code: 0},
		{name: "schema only still checks each line", args: []string{"--schema-only"}, stdin: strings.Replace(example, `"schema":1`, `"schema":2`, 1), code: 1,
			stdout: []string{"line 1: start /schema: value must be 1"}},
		{name: "not JSON", stdin: lines[0] + "hello\n" + lines[len(lines)-2], code: 1, stdout: []string{"line 2: not a JSON object"}},
		{name: "empty", stdin: "", code: 1, stdout: []string{"stream: empty"}},
		{name: "an argument", args: []string{"events.jsonl"}, code: 2},
		{name: "unknown flag", args: []string{"--strict"}, code: 2},
		{name: "help", args: []string{"-h"}, code: 0,
			stdout: []string{"Usage: agentrun validate [--schema-only] < events.jsonl", "", "Flags:", "  -schema-only", "check each line against the JSON Schema only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := validate(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout.String(), stderr.String())
			}
			got := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			if stdout.Len() == 0 {
				got = nil
			}
			if len(got) != len(tt.stdout) {
				t.Fatalf("stdout has %d lines, want %d:\n%s", len(got), len(tt.stdout), stdout.String())
			}
			for i := range got {
				if !strings.Contains(got[i], tt.stdout[i]) {
					t.Errorf("line %d = %q, want %q in it", i+1, got[i], tt.stdout[i])
				}
			}
		})
	}
}
