package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// fakeCLI writes a shell script that stands in for claude: it reads its
// stdin (the prompt message), writes output to stdout and exits. The edge
// cases below cannot be had from the real CLI on demand.
func fakeCLI(t *testing.T, stdout []byte, script string) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "stdout")
	if err := os.WriteFile(out, stdout, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "claude")
	body := "#!/bin/sh\ncat >/dev/null\ncat '" + out + "'\n" + script + "\n"
	if err := os.WriteFile(bin, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func realCapture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "adapters", "claudecode", "testdata", "real", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runFake(t *testing.T, bin string) *result {
	t.Helper()
	return runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir()}, prompt: "hi",
		env: []string{"AGENTRUN_CLAUDE_BIN=" + bin}})
}

func TestBadInputIsSkippedAndKept(t *testing.T) {
	good := realCapture(t, "tool")
	lines := bytes.SplitAfter(good, []byte("\n"))
	// A 16 MiB tool result for the Bash call of the capture, valid JSON.
	huge := []byte(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_big","type":"tool_result","content":"` +
		strings.Repeat("x", 16<<20) + `"}]},"parent_tool_use_id":null}` + "\n")
	bigCall := []byte(`{"type":"assistant","message":{"model":"m","id":"msg_big","content":[{"type":"tool_use","id":"toolu_big","name":"Read","input":{"file_path":"/big"}}],"usage":{"input_tokens":1,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}},"parent_tool_use_id":null}` + "\n")
	junk := [][]byte{
		[]byte("this is not JSON at all\n"),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"trunc` + "\n"),
		[]byte(`{"type":"mystery_event","payload":{"x":1}}` + "\n"),
		[]byte("{\"type\":\"assistant\",\"message\":{\"model\":\"m\",\"id\":\"msg_utf\",\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe bytes\"}]},\"parent_tool_use_id\":null}\n"),
		[]byte("\n"),
		[]byte("\x00\x01\x02 binary\n"),
	}
	var out []byte
	out = append(out, lines[0]...) // init
	for _, j := range junk {
		out = append(out, j...)
	}
	out = append(out, bigCall...)
	out = append(out, huge...)
	for _, l := range lines[1:] {
		out = append(out, l...)
	}
	r := runFake(t, fakeCLI(t, out, "exit 0"))
	if !bytes.Equal(r.raw, out) {
		t.Fatalf("--raw is not byte for byte the CLI's stdout: %d bytes, want %d", len(r.raw), len(out))
	}
	end := r.end()
	if end == nil || end.Status != events.StatusFinished {
		t.Fatalf("end %+v: junk lines must not fail the run", end)
	}
	var sawBig, sawUTF bool
	for _, e := range r.events {
		switch e := e.(type) {
		case *events.Tool:
			sawBig = sawBig || e.ID == "toolu_big"
		case *events.Text:
			if strings.HasPrefix(e.Text, "bad ") {
				sawUTF = true
				if e.Text != "bad \uFFFD\uFFFD bytes" {
					t.Errorf("invalid UTF-8 text = %q, want U+FFFD replacements", e.Text)
				}
			}
		}
	}
	if !sawBig || !sawUTF {
		t.Errorf("the 16 MiB line (%v) or the invalid UTF-8 line (%v) was not translated: %s", sawBig, sawUTF, r.types())
	}
}

func TestCLIKilledMidLine(t *testing.T) {
	good := realCapture(t, "tool")
	cut := bytes.Index(good, []byte(`{"type":"assistant"`))
	partial := append(append([]byte{}, good[:cut]...), []byte(`{"type":"assistant","message":{"model":"claude-son`)...)
	for _, tt := range []struct {
		sandbox  string
		exitCode *int // end.exit_code
		detail   string
	}{
		// Without a sandbox agentrun is the CLI's parent and sees the signal;
		// in the sandbox the init is, and reports it: both read the same.
		{"none", nil, "claude-code was killed by signal 9 (killed)"},
		{"bubblewrap", nil, "claude-code was killed by signal 9 (killed)"},
	} {
		t.Run(tt.sandbox, func(t *testing.T) {
			r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--sandbox", tt.sandbox, "--cwd", t.TempDir()}, prompt: "hi",
				env: []string{"AGENTRUN_CLAUDE_BIN=" + fakeCLI(t, partial, "kill -9 $$")}})
			if !bytes.Equal(r.raw, partial) {
				t.Errorf("--raw lost bytes: %d, want %d", len(r.raw), len(partial))
			}
			end := r.end()
			if end == nil || end.Status != events.StatusFailed || !reflect.DeepEqual(end.ExitCode, tt.exitCode) || end.Detail != tt.detail {
				t.Fatalf("end %+v; want failed, exit_code %v, detail %q", end, tt.exitCode, tt.detail)
			}
			if r.exit != 1 {
				t.Errorf("agentrun exit %d, want 1", r.exit)
			}
		})
	}
}

func TestCLICrashUsesStderr(t *testing.T) {
	r := runFake(t, fakeCLI(t, nil, "printf '  fatal: out of cheese\\n' >&2; exit 3"))
	end := r.end()
	// The last 500 characters of stderr as written, white space and all.
	if end == nil || end.Status != events.StatusFailed || end.ExitCode == nil || *end.ExitCode != 3 || end.Detail != "  fatal: out of cheese\n" {
		t.Fatalf("end %+v; want failed, exit 3, the stderr as detail", end)
	}
	if !bytes.Contains(r.stderr, []byte("fatal: out of cheese")) {
		t.Errorf("the CLI's stderr did not pass through: %q", r.stderr)
	}
	if got := r.types(); got != "start end" {
		t.Errorf("types %s", got)
	}
}

func TestCLIMissing(t *testing.T) {
	tests := []struct {
		name, env, detail string
	}{
		{"env points nowhere", "AGENTRUN_CLAUDE_BIN=/nonexistent/claude", "AGENTRUN_CLAUDE_BIN=/nonexistent/claude is not an executable file"},
		{"not in PATH", "PATH=" + t.TempDir(), `no "claude" in PATH`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{tt.env}
			if strings.HasPrefix(tt.env, "PATH=") {
				env = append(env, "AGENTRUN_CLAUDE_BIN=")
			}
			r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code"}, prompt: "hi", env: env})
			end := r.end()
			if len(r.events) != 1 || end == nil || end.Status != events.StatusFailed || !strings.Contains(end.Detail, tt.detail) {
				t.Fatalf("%s: want a single failed end naming what is missing (%q)", r.stdout, tt.detail)
			}
		})
	}
}

func TestRejectedFlags(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		prompt string
		detail string
	}{
		{"unknown flag", []string{"--runtime", "claude-code", "--bogus"}, "hi", "flag provided but not defined: -bogus; run agentrun run -h"},
		{"unknown runtime", []string{"--runtime", "nope"}, "hi", "--runtime: unknown runtime"},
		{"no prompt", []string{"--runtime", "claude-code"}, "", "no prompt: pass the prompt as the last argument"},
		{"bad env", []string{"--runtime", "claude-code", "--env", "1X=2"}, "hi", `--env "1X=2" is not NAME=VALUE`},
		{"bad format", []string{"--runtime", "claude-code", "--format", "html"}, "hi", `--format "html": use jsonl, text or rich`},
		{"missing image", []string{"--runtime", "claude-code", "--image", "/no/such.png"}, "hi", "--image /no/such.png: not a readable file"},
		{"bad cwd", []string{"--runtime", "claude-code", "--cwd", "/no/such/dir"}, "hi", "--cwd /no/such/dir"},
		{"resume without dir", []string{"--runtime", "claude-code", "--resume", "x"}, "hi", "--resume needs --session-dir"},
		{"negative timeout", []string{"--runtime", "claude-code", "--timeout", "-1"}, "hi", "--timeout must be a positive number"},
		{"two prompts", []string{"--runtime", "claude-code", "a"}, "b", "expected one prompt argument, got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAgentrun(t, invocation{args: tt.args, prompt: tt.prompt, env: []string{"AGENTRUN_CLAUDE_BIN=/bin/false"}})
			end := r.end()
			if len(r.events) != 1 || end == nil || end.Status != events.StatusRejected || !strings.Contains(end.Detail, tt.detail) || r.exit != 2 {
				t.Fatalf("got %s (exit %d); want a single rejected end containing %q", r.stdout, r.exit, tt.detail)
			}
			if end.ExitCode != nil {
				t.Errorf("exit_code %d for a run that never started", *end.ExitCode)
			}
		})
	}
}

// TestEndFollowsTheProcessNotTheDrain: a CLI that finished while a child
// it left behind holds stdout open ends with its own status, even when
// --timeout fires while agentrun drains that output.
func TestEndFollowsTheProcessNotTheDrain(t *testing.T) {
	for _, sb := range []string{"none", "bubblewrap"} {
		t.Run(sb, func(t *testing.T) {
			bin := fakeCLI(t, realCapture(t, "tool"), "sleep 5 &\nexit 0")
			r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--sandbox", sb, "--timeout", "1", "--cwd", t.TempDir()},
				prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin}})
			end := r.end()
			if end == nil || end.Status != events.StatusFinished || end.ExitCode == nil || *end.ExitCode != 0 {
				t.Fatalf("end %+v; want finished with exit code 0", end)
			}
		})
	}
}

func TestEnvFileNamesOnly(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, []byte("# secrets\nexport GH_TOKEN=\"s3cret\"\nOTHER='v'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	dump := filepath.Join(ws, "env.out") // the workspace: the one place the sandbox writes
	bin := fakeCLI(t, realCapture(t, "tool"), "env > '"+dump+"'")
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--env-file", envFile, "--env", "EXTRA=1", "--pass-env", "PASSED",
		"--cwd", ws}, prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "PASSED=p"}})
	start := r.events[0].(*events.Start)
	// Only what was set for this run by value: --pass-env names are not
	// listed.
	if strings.Join(start.Env, ",") != "GH_TOKEN,OTHER,EXTRA" {
		t.Errorf("start.env = %v", start.Env)
	}
	if bytes.Contains(r.stdout, []byte("s3cret")) {
		t.Errorf("a variable's value leaked into the event stream")
	}
	seen, _ := os.ReadFile(dump)
	for _, want := range []string{"GH_TOKEN=s3cret", "OTHER=v", "EXTRA=1", "PASSED=p"} {
		if !bytes.Contains(seen, []byte(want)) {
			t.Errorf("the CLI did not get %s", want)
		}
	}
}

// TestSandboxCannotStart: when bubblewrap cannot create its namespaces (a
// RuntimeDefault seccomp profile in a Pod, say), the run ends with a detail
// that names the cause and the fix, not an opaque bwrap error. A stand-in
// bwrap fails the way the real one does there.
func TestSandboxCannotStart(t *testing.T) {
	fake := t.TempDir()
	script := "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	summaryFile := filepath.Join(t.TempDir(), "termination-log")
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir(), "--summary", summaryFile}, prompt: "hi",
		env: []string{"AGENTRUN_CLAUDE_BIN=/bin/true", "PATH=" + fake + ":/usr/bin:/bin"}})
	end := r.end()
	if len(r.events) != 1 || end == nil || end.Status != events.StatusFailed {
		t.Fatalf("got %s; want a single failed end", r.stdout)
	}
	// The summary tells the controller the sandbox was unavailable (its
	// reason SandboxUnavailable), not that the agent failed.
	raw, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := podcontract.Decode(raw); err != nil || s.Isolation == nil || !s.Isolation.Unavailable || s.Isolation.Sandbox != "bubblewrap" {
		t.Errorf("summary %s (%v): want isolation.unavailable", raw, err)
	}
	for _, want := range []string{"bubblewrap may not create its namespaces", "No permissions to creating new namespace", "agentrun/bwrap.json", "--sandbox none"} {
		if !strings.Contains(end.Detail, want) {
			t.Errorf("detail lacks %q: %s", want, end.Detail)
		}
	}
}

// TestSandboxStartMeetsAMountTableChange: bubblewrap fails to start when a
// mount of the host goes between its copy of the mounts and their
// read-only remount (a concurrent root run's workspace mount did, in CI).
// Nothing ran, so the run starts the sandbox again; a host whose mounts
// keep changing gets the cause after mountRaceTries starts. A stand-in
// bwrap fails the first starts the way the real one does, then hands over
// to the real one.
func TestSandboxStartMeetsAMountTableChange(t *testing.T) {
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	const race = `bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/tmp/agentrun-host-1/ws": No such file or directory`
	for _, tc := range []struct {
		failures   int
		wantStatus string
		wantStarts int
	}{{1, events.StatusFinished, 2}, {2, events.StatusFinished, 3}, {3, events.StatusFailed, 3}, {5, events.StatusFailed, 3}} {
		t.Run(fmt.Sprintf("%d failures", tc.failures), func(t *testing.T) {
			fake, state := t.TempDir(), t.TempDir()
			starts, msg := filepath.Join(state, "starts"), filepath.Join(state, "message")
			if err := os.WriteFile(msg, []byte(race+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			script := fmt.Sprintf("#!/bin/sh\necho x >> '%s'\nif [ $(wc -l < '%s') -le %d ]; then cat '%s' >&2; exit 1; fi\nexec '%s' \"$@\"\n",
				starts, starts, tc.failures, msg, real)
			if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			bin := fakeCLI(t, realCapture(t, "tool"), "")
			r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", t.TempDir()}, prompt: "hi",
				env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "PATH=" + fake + ":/usr/bin:/bin"}})
			end := r.end()
			if end == nil || end.Status != tc.wantStatus {
				t.Fatalf("ended %+v; want %s\nstderr %s", end, tc.wantStatus, r.stderr)
			}
			if data, _ := os.ReadFile(starts); bytes.Count(data, []byte("\n")) != tc.wantStarts {
				t.Errorf("bubblewrap started %d times; want %d", bytes.Count(data, []byte("\n")), tc.wantStarts)
			}
			if tc.wantStatus == events.StatusFailed && !strings.Contains(end.Detail, "mount table kept changing") {
				t.Errorf("detail lacks the cause: %s", end.Detail)
			}
		})
	}
}

// TestPodContract: what the Pod's containers rely on. --events gets the
// same jsonl stream as stdout, --summary the end summary (the termination
// message), --pass-env hands named variables of agentrun's environment
// (the Pod's Secret references) to the agent, values never in the stream.
func TestPodContract(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	eventsFile, summaryFile := filepath.Join(out, "events.jsonl"), filepath.Join(out, "termination-log")
	dump := filepath.Join(ws, "env.out")
	bin := fakeCLI(t, realCapture(t, "tool"), "env > '"+dump+"'")
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", ws, "--events", eventsFile, "--summary", summaryFile,
		"--pass-env", "ANTHROPIC_API_KEY", "--pass-env", "MYAPP_*", "--pass-env", "ABSENT_ONE", "--"},
		prompt: "-starts with a dash", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "ANTHROPIC_API_KEY=sk-secret", "MYAPP_B=2", "MYAPP_A=1", "UNRELATED=x"}})
	if got, _ := os.ReadFile(eventsFile); !bytes.Equal(got, r.stdout) {
		t.Errorf("--events differs from stdout:\n%s\n---\n%s", got, r.stdout)
	}
	raw, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := podcontract.Decode(raw)
	if err != nil || s.Status != "finished" || s.Result == nil || *s.Result != "Done: wrote hello.txt" || s.Counters.Tools != 1 || len(raw) > podcontract.MaxBytes {
		t.Errorf("summary %s (%v)", raw, err)
	}
	// start.env names what --env and --env-file set; passed variables are
	// not listed.
	if start := r.events[0].(*events.Start); len(start.Env) != 0 {
		t.Errorf("start.env = %v", start.Env)
	}
	if bytes.Contains(r.stdout, []byte("sk-secret")) {
		t.Errorf("a passed value leaked into the stream")
	}
	seen, _ := os.ReadFile(dump)
	if !bytes.Contains(seen, []byte("ANTHROPIC_API_KEY=sk-secret")) || !bytes.Contains(seen, []byte("MYAPP_A=1")) || bytes.Contains(seen, []byte("UNRELATED")) {
		t.Errorf("the agent's environment:\n%s", seen)
	}
	if end := r.end(); end == nil || end.Status != "finished" {
		t.Errorf("a prompt starting with - after -- must be a prompt: %+v", end)
	}
	if eventstest.Find[*events.Prompt](r.events) == nil {
		t.Errorf("no prompt event: %s", r.types())
	}
}

// TestRejectedRunLeavesSummary: a Pod whose flags are wrong still ends with
// a termination message saying so.
func TestRejectedRunLeavesSummary(t *testing.T) {
	summaryFile := filepath.Join(t.TempDir(), "termination-log")
	r := runAgentrun(t, invocation{args: []string{"--summary", summaryFile, "--runtime", "claude-code", "--bogus"}, prompt: "hi"})
	raw, err := os.ReadFile(summaryFile)
	if err != nil || r.exit != 2 {
		t.Fatalf("no summary for a rejected run (exit %d): %v", r.exit, err)
	}
	if s, err := podcontract.Decode(raw); err != nil || s.Status != events.StatusRejected || !strings.Contains(s.Detail, "-bogus") {
		t.Errorf("summary %s (%v)", raw, err)
	}
}
