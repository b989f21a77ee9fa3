package cli

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// textResult is an agentrun run with --format text on stdout and the
// jsonl stream in --events.
type textResult struct {
	text, stderr string
	events       []events.Event
	exit         int
}

func (r *textResult) end() *events.End {
	if len(r.events) == 0 {
		return nil
	}
	e, _ := r.events[len(r.events)-1].(*events.End)
	return e
}

// network is the run's network events as HOST:PORT ALLOWED REASON.
func (r *textResult) network() []string {
	var out []string
	for _, e := range r.events {
		if n, ok := e.(*events.NetworkAccess); ok {
			s := n.Host + ":" + strconv.Itoa(n.Port)
			if n.Allowed {
				s += " allowed"
			} else {
				s += " refused " + *n.Reason
			}
			out = append(out, s)
		}
	}
	return out
}

// runText runs `agentrun run --format text --events FILE ARGS` with stdin
// (nil: none) and checks the events file against the contract.
func runText(t *testing.T, args []string, stdin []byte, env []string, timeout time.Duration) *textResult {
	t.Helper()
	evPath := filepath.Join(t.TempDir(), "events.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentrun, append([]string{"run", "--format", "text", "--events", evPath}, args...)...)
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir()), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := &textResult{text: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentrun: %v\nstderr: %s", err, r.stderr)
	}
	data, _ := os.ReadFile(evPath)
	for _, err := range eventstest.Check(data) {
		t.Errorf("stream contract: %v", err)
	}
	rd := events.NewReader(bytes.NewReader(data))
	for {
		e, err := rd.Next()
		if err != nil {
			break
		}
		r.events = append(r.events, e)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", r.text, r.stderr)
	}
	return r
}

// TestLoopbackModel: the obvious command reaches a model on this
// machine's loopback for every real CLI (claude-code, codex, pi, dsh): the base URL on 127.0.0.1 (or
// localhost) with --env, that host and port allowed with --allow-host.
// Without the entry the run says at once why it cannot (a [note] and a
// network event, and the CLI fails on the proxy's 403 instead of retrying
// the sandbox's empty loopback); with --in-pod an entry for the loopback
// is refused before the run.
func TestLoopbackModel(t *testing.T) {
	for _, c := range cliRuntimes {
		t.Run(c.name, func(t *testing.T) {
			srv, err := mockmodel.Start(mockmodel.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			u, _ := url.Parse(srv.URL())
			env := []string{c.binEnv() + "=" + c.bin(t)}
			hosts := []string{"127.0.0.1"}
			if c.name == "claude-code" {
				hosts = append(hosts, "localhost")
			}
			for _, host := range hosts {
				addr := host + ":" + u.Port()
				before := len(srv.Ledger())
				r := runText(t, c.loopbackArgs("http://"+addr, t.TempDir(), "--allow-host", addr, "--", "say hi"), nil, env, time.Minute)
				if end := r.end(); end == nil || end.Status != events.StatusFinished || r.exit != 0 {
					t.Fatalf("%s: end %+v, exit %d", addr, end, r.exit)
				}
				if n := r.network(); len(n) == 0 || n[0] != addr+" allowed" {
					t.Errorf("%s: network events %q, want %s allowed", addr, n, addr)
				}
				if len(srv.Ledger()) == before {
					t.Errorf("%s: the mock served no call", addr)
				}
				want := "[note] the agent reaches this machine's " + addr
				if !strings.Contains(r.text, want) {
					t.Errorf("%s: no %q in\n%s", addr, want, r.text)
				}
			}

			// Not allowed: a note at the start and the proxy's refusal.
			addr := "127.0.0.1:" + u.Port()
			start := time.Now()
			r := runText(t, c.loopbackArgs("http://"+addr, t.TempDir(), "--timeout", "50", "--", "say hi"), nil, env, time.Minute)
			took := time.Since(start)
			if n := r.network(); len(n) == 0 || n[0] != addr+" refused private_address" {
				t.Errorf("refused: network events %q, want %s refused private_address", n, addr)
			}
			note := "[note] " + c.baseVar + " points at " + addr
			if !strings.Contains(r.text, note+" on the loopback, which inside the sandbox is the sandbox's own: the proxy refuses it. Pass --allow-host "+addr) {
				t.Errorf("refused: no %q in\n%s", note, r.text)
			}
			if end := r.end(); end == nil || end.Status != events.StatusFailed {
				t.Errorf("refused: end %+v after %s, want failed at once (the CLI's own error)", end, took)
			}

			// In a Pod the loopback stays refused.
			r = runText(t, c.loopbackArgs("http://"+addr, t.TempDir(), "--in-pod", "--allow-host", addr, "--", "say hi"), nil, env, time.Minute)
			if end := r.end(); r.exit != 2 || end == nil || end.Status != events.StatusRejected ||
				!strings.Contains(end.Detail, "--allow-host "+addr+": in a Pod the loopback holds agentrun's own servers") {
				t.Errorf("--in-pod: exit %d, end %+v", r.exit, r.end())
			}
		})
	}
}

// TestNoModelRequestNote: a CLI that never reaches the proxy (its model's
// host listed in NO_PROXY, so dialled inside the sandbox, where nothing
// answers) gets a [note] runner.NoModelNoteAfter (30 s) after the start,
// while it retries; the run goes on to its --timeout.
func TestNoModelRequestNote(t *testing.T) {
	args := []string{"--runtime", "claude-code", "--model", "sonnet", "--cwd", t.TempDir(), "--timeout", "40",
		"--env", "ANTHROPIC_API_KEY=test-key", "--env", "ANTHROPIC_BASE_URL=http://model.internal:8080",
		"--env", "NO_PROXY=model.internal", "--", "say hi"}
	r := runText(t, args, nil, []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t)}, 2*time.Minute)
	want := "[note] no model request in 30 s: claude-code reported no model call, and it asked the proxy for no connection. Check the model's base URL"
	if !strings.Contains(r.text, want) {
		t.Errorf("no %q in\n%s", want, r.text)
	}
	if end := r.end(); end == nil || end.Status != events.StatusTimeout {
		t.Errorf("end %+v, want timeout", end)
	}
	if i, j := strings.Index(r.text, "[note] no model request"), strings.Index(r.text, "[end]"); i < 0 || j < i {
		t.Errorf("the note is not before [end]:\n%s", r.text)
	}
}

// TestPromptFromStdinAndFile: a 1 MB prompt (a ConfigMap's size) reaches
// every real CLI whole, from stdin (-) and from --prompt-file, with no
// limit of the argument list in the way; the prompt event holds it, and
// the text format shows its first line cut short.
func TestPromptFromStdinAndFile(t *testing.T) {
	prompt := "say hi. " + strings.Repeat("lorem ipsum dolor sit amet ", (1_000_000-100)/27) + "THE-END-MARKER"
	prompt += strings.Repeat(".", 1_000_000-len(prompt))
	dir := t.TempDir()
	file := filepath.Join(dir, "prompt.txt")
	if err := os.WriteFile(file, []byte(prompt), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cliRuntimes {
		for _, how := range []string{"stdin", "file"} {
			t.Run(c.name+"/"+how, func(t *testing.T) {
				var log lockedBuffer
				srv, err := mockmodel.Start(mockmodel.Options{RequestLog: &log})
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				u, _ := url.Parse(srv.URL())
				addr := "127.0.0.1:" + u.Port()
				args := c.loopbackArgs("http://"+addr, t.TempDir(), "--allow-host", addr)
				var stdin []byte
				if how == "stdin" {
					args, stdin = append(args, "-"), []byte(prompt)
				} else {
					args = append(args, "--prompt-file", file)
				}
				r := runText(t, args, stdin, []string{c.binEnv() + "=" + c.bin(t)}, 2*time.Minute)
				if end := r.end(); end == nil || end.Status != events.StatusFinished {
					t.Fatalf("end %+v", end)
				}
				p := eventstest.Find[*events.Prompt](r.events)
				if p == nil || p.Text != prompt {
					t.Errorf("the prompt event does not hold the prompt whole (%d bytes)", len(prompt))
				}
				if !strings.Contains(log.String(), "THE-END-MARKER") || !strings.Contains(log.String(), "say hi. lorem") {
					t.Errorf("the model did not get the whole prompt")
				}
				for _, line := range strings.Split(r.text, "\n") {
					if strings.HasPrefix(line, "[main] prompt ") && len(line) > 300 {
						t.Errorf("the text format's prompt line is %d bytes long", len(line))
					}
				}
			})
		}
	}
	// The prompt given twice, or empty, is refused with what to do.
	for _, tt := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"--prompt-file", file, "-"}, "x", "--prompt-file " + file + " and - (stdin): give the prompt once"},
		{[]string{"-"}, " \n", "the prompt from stdin (-) is empty: pipe the task in"},
		{[]string{"--prompt-file", filepath.Join(dir, "missing.txt")}, "", "--prompt-file " + filepath.Join(dir, "missing.txt") + ": no such file"},
	} {
		r := runText(t, append([]string{"--runtime", "codex"}, tt.args...), []byte(tt.stdin), nil, time.Minute)
		if end := r.end(); r.exit != 2 || end == nil || end.Status != events.StatusRejected || !strings.Contains(end.Detail, tt.want) {
			t.Errorf("%v: exit %d, end %+v, want rejected with %q", tt.args, r.exit, r.end(), tt.want)
		}
	}
}
