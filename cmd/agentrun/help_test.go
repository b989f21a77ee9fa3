package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/internal/version"
)

// verbs are the verbs the usage text lists.
func verbs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  agentrun ([a-z]+)`).FindAllStringSubmatch(usage, -1) {
		out = append(out, m[1])
	}
	if len(out) < 6 {
		t.Fatalf("verbs %v in the usage text", out)
	}
	return out
}

// invoke runs dispatch with stdout and stderr in files.
func invoke(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	code = dispatch(args, in, out, errF)
	out.Close()
	errF.Close()
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

// TestHelpOfEveryVerb: -h and --help print the verb's usage and flags on
// stdout and exit 0 (run's help is no rejected run).
func TestHelpOfEveryVerb(t *testing.T) {
	for _, verb := range verbs(t) {
		for _, h := range []string{"-h", "--help", "-help"} {
			code, stdout, stderr := invoke(t, verb, h)
			if code != 0 || stderr != "" {
				t.Errorf("agentrun %s %s: exit %d, stderr %q", verb, h, code, stderr)
			}
			if !strings.HasPrefix(stdout, "Usage: agentrun "+verb+" ") || !strings.Contains(stdout, "\nFlags:\n  -") {
				t.Errorf("agentrun %s %s printed no usage with flags:\n%s", verb, h, stdout)
			}
			if strings.Contains(stdout, `"type":"end"`) {
				t.Errorf("agentrun %s %s wrote an event:\n%s", verb, h, stdout)
			}
		}
	}
	for _, h := range []string{"-h", "--help", "help"} {
		if code, stdout, _ := invoke(t, h); code != 0 || stdout != usage {
			t.Errorf("agentrun %s: exit %d, stdout %q", h, code, stdout)
		}
	}
}

// TestVersion: --version prints the version, the commit and every pinned
// CLI, on stdout, exit 0.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		code, stdout, stderr := invoke(t, arg)
		if code != 0 || stderr != "" {
			t.Errorf("agentrun %s: exit %d, stderr %q", arg, code, stderr)
		}
		if !strings.HasPrefix(stdout, "agentrun "+version.Version+"\ncommit ") {
			t.Errorf("agentrun %s: %q", arg, stdout)
		}
		for _, c := range adapters.CLIs {
			if !strings.Contains(stdout, c.Package+" "+c.Version) {
				t.Errorf("agentrun %s does not name %s %s:\n%s", arg, c.Package, c.Version, stdout)
			}
		}
	}
}

// TestUsageErrors: a verb's bad flag or argument says what is wrong on
// stderr, with the synopsis, and exits 2.
func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"translate"}, "agentrun translate: --runtime is required: the runtime whose --raw output is on stdin (claude-code, codex, dsh, pi)\nusage: agentrun translate"},
		{[]string{"translate", "--runtime", "codex", "raw.jsonl"}, `unexpected argument "raw.jsonl"; the raw output comes on stdin`},
		{[]string{"translate", "--raw", "x"}, "agentrun translate: flag provided but not defined: -raw\nusage: agentrun translate"},
		{[]string{"render", "events.jsonl"}, `agentrun render: unexpected argument "events.jsonl"; the stream comes on stdin`},
		{[]string{"tail"}, "agentrun tail: expected one events file, got 0 arguments\nusage: agentrun tail"},
		{[]string{"sandbox", "--nope"}, "agentrun sandbox: flag provided but not defined: -nope"},
		{[]string{"nope"}, `agentrun: unknown verb "nope"`},
	} {
		code, stdout, stderr := invoke(t, tt.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("agentrun %v: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, stdout, stderr, tt.want)
		}
	}
}

// TestTranslateMessages: translate words what is wrong with its input for
// a file, not a live process, and exits 4 when the input holds none of the
// runtime's output.
func TestTranslateMessages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cut, err := os.ReadFile(filepath.Join("..", "..", "adapters", "claudecode", "testdata", "real", "tool.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 65<<20) + "\n"
	for _, tt := range []struct {
		name, input, runtime string
		code                 int
		detail, stderr       string
	}{
		{"garbage", "garbage\n", "claude-code", 4,
			"the input holds no claude-code output that agentrun knows (1 line read): pass the --raw file of a claude-code run, and --runtime of the CLI that wrote it",
			"agentrun translate: the input holds no claude-code output"},
		{"empty", "", "codex", 4, "the input holds no codex output that agentrun knows (0 lines read)", "agentrun translate: the input holds no codex output"},
		{"a cut capture", strings.Join(strings.SplitAfter(string(cut), "\n")[:3], ""), "claude-code", 1,
			"the saved claude-code output stops before the end of its turn: the run was stopped or crashed, or the file is cut short", ""},
		{"a huge line", huge, "pi", 4, "the input holds no pi output", "[agentrun] skipped an input line of 68157440 bytes (over the 64 MiB limit)\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, err := os.Open(write(tt.name, tt.input))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			out, _ := os.Create(filepath.Join(dir, tt.name+".out"))
			errF, _ := os.Create(filepath.Join(dir, tt.name+".err"))
			code := dispatch([]string{"translate", "--runtime", tt.runtime}, in, out, errF)
			out.Close()
			errF.Close()
			stdout, _ := os.ReadFile(out.Name())
			stderr, _ := os.ReadFile(errF.Name())
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
			var end struct{ Type, Status, Detail string }
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &end); err != nil || end.Type != "end" || end.Status != "failed" || !strings.HasPrefix(end.Detail, tt.detail) {
				t.Errorf("end %+v (%v), want failed with %q", end, err, tt.detail)
			}
			if !strings.Contains(string(stderr), tt.stderr) || strings.Contains(string(stderr), "--raw;") || strings.Contains(string(stderr), "kept in --raw") {
				t.Errorf("stderr %q, want %q", stderr, tt.stderr)
			}
		})
	}
}
