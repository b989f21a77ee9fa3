package cli

// Attacks through the CLI's own output: a tool the agent runs can write
// into the CLI's stdout (/proc/$PPID/fd/1) and stderr, so anything a fake
// CLI prints here an agent could have made a real one print.

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrun-dev/agentrun/events"
)

const runnerSecret = "RUNNER-CREDENTIAL-5d1e"

// TestSessionIDIsNoPath is the review's fakeclaude4: the agent plants a
// link to /proc/self/environ in the workspace and reports a session id that
// climbs out of the state directory to it. Read by the runner, the link
// would be the runner's own environment, real credential included, copied
// into --session-dir and handed by --resume to the next agent.
func TestSessionIDIsNoPath(t *testing.T) {
	for _, sb := range []string{"bubblewrap", "none"} {
		t.Run(sb, func(t *testing.T) {
			ws, sessions := t.TempDir(), t.TempDir()
			bin := fakeCLI(t, nil, `ln -sf /proc/self/environ "$PWD/env.jsonl"
ID="../../../../../../../../proc/self/root$PWD/env"
echo "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"$ID\"}"
echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\",\"session_id\":\"$ID\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}"`)
			args := []string{"--runtime", "claude-code", "--sandbox", sb, "--cwd", ws, "--session-dir", sessions}
			r := runAgentrun(t, invocation{args: args, prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "RUNNER_TOKEN=" + runnerSecret}})
			end := r.end()
			if end == nil {
				t.Fatalf("no end: %s", r.stdout)
			}
			if end.Status != events.StatusFinished || end.SessionID != nil {
				t.Errorf("end %s session_id %v: want finished with no session saved", end.Status, end.SessionID)
			}
			if !bytes.Contains(r.stderr, []byte("is not a plain id")) {
				t.Errorf("no warning about the session id: %s", r.stderr)
			}
			if !bytes.Contains(r.raw, []byte("proc/self/root")) {
				t.Errorf("the raw output must keep the line")
			}
			_ = filepath.WalkDir(sessions, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					b, _ := os.ReadFile(p)
					if bytes.Contains(b, []byte(runnerSecret)) {
						t.Errorf("the runner's environment was saved as a session: %s", p)
					} else {
						t.Errorf("a file was saved: %s", p)
					}
				}
				return nil
			})
			// Nor can the id be passed back: --resume takes ids only.
			id := "../../../../../../../../proc/self/root" + ws + "/env"
			r = runAgentrun(t, invocation{args: append(args, "--resume", id), prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin}})
			if e := r.end(); e == nil || e.Status != events.StatusRejected || !strings.Contains(e.Detail, "is not a session id") {
				t.Errorf("--resume %s: %+v", id, e)
			}
		})
	}
}

// TestEscapeSequencesDoNotReachTheTerminal is the review's fakeclaude7: the
// agent's text and result carry OSC 0 (window title), OSC 52 (a clipboard
// write) and ESC[2J (clear screen), and its stderr an OSC 52. Neither the
// text format (rich writes it when stdout is no terminal) nor the stderr
// passed through may carry them; jsonl keeps the text as it is, escaped by
// JSON.
func TestEscapeSequencesDoNotReachTheTerminal(t *testing.T) {
	bin := fakeCLI(t, nil, `printf '\033]52;c;ZWNobyBwd25lZAo=\007 stderr-escape \233 8-bit CSI\n' >&2
cat <<'EOF'
{"type":"assistant","message":{"id":"m1","role":"assistant","model":"x","content":[{"type":"text","text":"hello \u001b]0;TITLE-PWNED\u0007 \u001b[2J world\tand a tab\r\nsecond line\u009b31m \u001b]52;c;ZWNobyBwd25lZAo=\u0007"}],"usage":{"input_tokens":1,"output_tokens":1}}}
{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{"input_tokens":1,"output_tokens":1}}
EOF`)
	for _, format := range []string{"text", "rich", "jsonl"} {
		t.Run(format, func(t *testing.T) {
			cmd := exec.Command(agentrun, "run", "--runtime", "claude-code", "--format", format, "--cwd", t.TempDir(), "hi")
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "AGENTRUN_CLAUDE_BIN="+bin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %s %s", err, stdout.Bytes(), stderr.Bytes())
			}
			control := func(c rune) bool {
				return c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 && c < 0xa0 || c == utf8.RuneError
			}
			for name, out := range map[string][]byte{"stdout": stdout.Bytes(), "stderr": stderr.Bytes()} {
				if format == "jsonl" && name == "stdout" {
					continue // JSON escapes them: \u001b
				}
				if i := bytes.IndexFunc(out, control); i >= 0 {
					t.Errorf("%s carries a control character at %d: %q", name, i, out)
				}
			}
			if !bytes.Contains(stderr.Bytes(), []byte("]52;c;ZWNobyBwd25lZAo= stderr-escape  8-bit CSI")) {
				t.Errorf("the rest of stderr must pass: %q", stderr.Bytes())
			}
			if format != "jsonl" && (!bytes.Contains(stdout.Bytes(), []byte("hello ]0;TITLE-PWNED [2J world\tand a tab")) ||
				!bytes.Contains(stdout.Bytes(), []byte("\n    second line31m ]52;c;ZWNobyBwd25lZAo=\n"))) {
				t.Errorf("the text around the sequences must stay: %q", stdout.Bytes())
			}
			if format == "jsonl" && !bytes.Contains(stdout.Bytes(), []byte(`hello \u001b]0;TITLE-PWNED\u0007`)) {
				t.Errorf("jsonl keeps the text as it is: %q", stdout.Bytes())
			}
		})
	}
}

// TestSessionsOfOtherRunsAreOutOfReach is the review's 3-sessions.sh: the
// sessions of other runs lie in --session-dir, which a Pod's agent owns (it
// runs as the same user as the runner). The agent reads them, and reports
// another run's session id in the CLI's output with a transcript of its own
// under that id: saved under the reported id, it would replace the other
// run's session, and the next --resume of it would hand the agent's words to
// that run's user. --session-dir reads as nothing inside, and the session
// is saved only under the id agentrun gave the CLI.
func TestSessionsOfOtherRunsAreOutOfReach(t *testing.T) {
	const victim = "11111111-2222-4333-8444-555555555555"
	for _, u := range []struct {
		name   string
		uid    int
		prefix []string
	}{
		{"root", 0, nil},
		{"nobody", 65534, []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}},
	} {
		t.Run(u.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("/var/tmp", "agentrun-sessions-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "agentrun") // where the unprivileged user can run it
			if b, err := os.ReadFile(agentrun); err != nil || os.WriteFile(bin, b, 0o755) != nil {
				t.Fatalf("copying agentrun: %v", err)
			}
			sessions, ws, home := filepath.Join(dir, "sessions"), filepath.Join(dir, "ws"), filepath.Join(dir, "home")
			victimFile := filepath.Join(sessions, "claude-code", victim+".jsonl")
			victimLine := `{"type":"user","message":{"role":"user","content":"VICTIM SECRET"}}` + "\n"
			for _, d := range []string{filepath.Dir(victimFile), ws, home} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(victimFile, []byte(victimLine), 0o600); err != nil {
				t.Fatal(err)
			}
			fake := filepath.Join(dir, "claude")
			if err := os.WriteFile(fake, []byte(`#!/bin/sh
cat >/dev/null
while [ $# -gt 0 ]; do [ "$1" = --session-id ] && SID=$2; shift; done
for f in `+sessions+`/claude-code/*.jsonl; do echo "agent reads $f: $(cat "$f" 2>&1)" >&2; done
mkdir -p "$CLAUDE_CONFIG_DIR/projects/x"
echo '{"type":"user","message":{"role":"user","content":"INJECTED"}}' > "$CLAUDE_CONFIG_DIR/projects/x/`+victim+`.jsonl"
echo '{"type":"user","message":{"role":"user","content":"GENUINE"}}' > "$CLAUDE_CONFIG_DIR/projects/x/$SID.jsonl"
echo '{"type":"system","subtype":"init","session_id":"`+victim+`"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"`+victim+`","usage":{"input_tokens":1,"output_tokens":1}}'
`), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{sessions, ws, home} {
				if err := filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
					if err != nil {
						return err
					}
					return os.Lchown(p, u.uid, u.uid)
				}); err != nil {
					t.Fatal(err)
				}
			}
			args := append(append([]string{}, u.prefix...), bin, "run", "--runtime", "claude-code", "--format", "jsonl",
				"--session-dir", sessions, "--cwd", ws, "hi")
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "AGENTRUN_CLAUDE_BIN=" + fake}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			_ = cmd.Run()
			var end *events.End
			rd := events.NewReader(bytes.NewReader(stdout.Bytes()))
			for {
				e, err := rd.Next()
				if err != nil {
					break
				}
				if x, ok := e.(*events.End); ok {
					end = x
				}
			}
			if end == nil || end.Status != events.StatusFinished {
				t.Fatalf("end %+v\nstdout %s\nstderr %s", end, stdout.Bytes(), stderr.Bytes())
			}
			if bytes.Contains(stderr.Bytes(), []byte("VICTIM SECRET")) {
				t.Errorf("the agent read another run's session: %s", stderr.Bytes())
			}
			if b, _ := os.ReadFile(victimFile); string(b) != victimLine {
				t.Errorf("another run's session was replaced: %q", b)
			}
			if end.SessionID == nil || *end.SessionID == victim {
				t.Fatalf("end.session_id %v: want the id agentrun gave the CLI", end.SessionID)
			}
			if b, _ := os.ReadFile(filepath.Join(sessions, "claude-code", *end.SessionID+".jsonl")); !bytes.Contains(b, []byte("GENUINE")) {
				t.Errorf("the run's own session was not saved under its id: %q", b)
			}
			if !bytes.Contains(stderr.Bytes(), []byte("not the one agentrun gave it")) {
				t.Errorf("no warning about the reported id: %s", stderr.Bytes())
			}
		})
	}
}
