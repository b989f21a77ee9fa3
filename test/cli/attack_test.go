package cli

// Attacks through the CLI's own output: a tool the agent runs can write
// into the CLI's stdout (/proc/$PPID/fd/1) and stderr, so anything a fake
// CLI prints here an agent could have made a real one print.

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
