package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// validator is agentrun-validate, built once for the tests and found on
// PATH by the in-process verbs (the test binary has none beside it).
var validator string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentrun-validate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	validator = filepath.Join(dir, validateBinary)
	if out, err := exec.Command("go", "build", "-o", validator, "../agentrun-validate").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ../agentrun-validate: %v\n%s", err, out)
		os.Exit(1)
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestValidateRunsTheValidator: `agentrun validate` is agentrun-validate,
// found beside agentrun, with its streams and exit codes; without it, the
// verb says what to install and ends with 2.
func TestValidateRunsTheValidator(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "agentrun"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Symlink(validator, filepath.Join(dir, validateBinary)); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "events", "format", "text", "testdata", "seed-example.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, string, int) {
		cmd := exec.Command(filepath.Join(dir, "agentrun"), append([]string{"validate"}, args...)...)
		cmd.Env = []string{"PATH=" + t.TempDir()}
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if _, exited := err.(*exec.ExitError); err != nil && !exited {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	tests := []struct {
		name, stdin string
		args        []string
		code        int
		stdout      string
	}{
		{name: "valid", stdin: string(example), code: 0},
		{name: "invalid", stdin: strings.Replace(string(example), `"schema":1`, `"schema":2`, 1), code: 1, stdout: "line 1: start /schema: value must be 1"},
		{name: "help", args: []string{"-h"}, code: 0, stdout: "Usage: agentrun validate [--schema-only] < events.jsonl"},
		{name: "usage error", args: []string{"--strict"}, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) {
				t.Errorf("exit %d, stdout %q (stderr %q); want exit %d and %q", code, stdout, stderr, tt.code, tt.stdout)
			}
		})
	}
	if err := os.Remove(filepath.Join(dir, validateBinary)); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(string(example))
	if code != 2 || !strings.Contains(stderr, "agentrun-validate is neither beside agentrun") || !strings.Contains(stderr, "make build") {
		t.Errorf("without the validator: exit %d, stderr %q", code, stderr)
	}
}

// TestAgentrunDoesNotLinkTheSchemaLibrary: the JSON Schema library's
// package initialisation compiles five drafts' meta-schemas on every start
// of a binary that links it; agentrun starts every agent and must not.
func TestAgentrunDoesNotLinkTheSchemaLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/santhosh-tekuri/jsonschema") || pkg == "github.com/agentrun-dev/agentrun/events/schema" {
			t.Errorf("agentrun links %s; `agentrun validate` is agentrun-validate's", pkg)
		}
	}
}
