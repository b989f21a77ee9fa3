package cli

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// tmuxIn runs tmux on its own server (socket in dir).
func tmuxIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("the rich terminal test needs tmux (apt-get install tmux): %v", err)
	}
	cmd := exec.Command(bin, append([]string{"-u", "-S", filepath.Join(dir, "sock"), "-f", "/dev/null"}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "LANG=") && !strings.HasPrefix(kv, "LC_ALL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestRichShowsTheModelWriting: the real claude-code streams the mock's
// slow answer (a piece every 150 ms for 6 s) and agentrun run --format
// rich on a real terminal (tmux, 100x30) shows the answer being written
// under the separator, growing, while no text event has come; at the end
// the scrollback holds only the text format's lines (the text event, no
// "writing…"), and the events file holds no trace of the partial text.
func TestRichShowsTheModelWriting(t *testing.T) {
	srv, err := mockmodel.Start(mockmodel.Options{SlowInterval: 150 * time.Millisecond, SlowMax: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	addr := "127.0.0.1:" + u.Port()
	dir, err := os.MkdirTemp("", "cli-tmux-") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	evPath := filepath.Join(dir, "events.jsonl")
	c := &claudeCodeCLI
	args := append([]string{agentrun, "run", "--format", "rich", "--events", evPath},
		c.loopbackArgs("http://"+addr, t.TempDir(), "--allow-host", addr, "--", "scenario:slow tell a story")...)
	var quoted []string
	for _, a := range args {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	script := fmt.Sprintf("env -u NO_COLOR HOME=%s %s=%s %s; echo AGENTRUN-DONE; sleep 60",
		t.TempDir(), c.binEnv(), c.bin(t), strings.Join(quoted, " "))
	tmuxIn(t, dir, "new-session", "-d", "-s", "run", "-x", "100", "-y", "30", script)
	defer tmuxIn(t, dir, "kill-server")
	capture := func(extra ...string) string {
		return tmuxIn(t, dir, append([]string{"capture-pane", "-p", "-t", "run"}, extra...)...)
	}
	// Mid-stream: the panel shows the text being written, and it grows.
	var seen []string
	deadline := time.Now().Add(45 * time.Second)
	for len(seen) < 2 {
		screen := capture()
		if time.Now().After(deadline) || strings.Contains(screen, "AGENTRUN-DONE") {
			t.Fatalf("no growing \"main writing…\" in the panel; seen %q, pane:\n%s", seen, capture("-S", "-"))
		}
		for _, line := range strings.Split(screen, "\n") {
			if strings.HasPrefix(line, "main writing… ") && (len(seen) == 0 || seen[len(seen)-1] != line) {
				seen = append(seen, line)
			}
		}
		if len(seen) > 0 && !strings.Contains(screen, "\n    slow") {
			t.Fatalf("the panel does not show the text being written:\n%s", screen)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for !strings.Contains(capture(), "AGENTRUN-DONE") {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end; pane:\n%s", capture("-S", "-"))
		}
		time.Sleep(300 * time.Millisecond)
	}
	all := capture("-S", "-")
	if strings.Contains(all, "writing…") || !strings.Contains(all, "[main] text slow slow") || !strings.Contains(all, "[end] finished") {
		t.Errorf("the scrollback after the end:\n%s", all)
	}
	data, err := os.ReadFile(evPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range eventstest.Check(data) {
		t.Errorf("stream contract: %v", err)
	}
	rd := events.NewReader(bytes.NewReader(data))
	var texts int
	for {
		e, err := rd.Next()
		if err != nil {
			break
		}
		if _, ok := e.(*events.Text); ok {
			texts++
		}
	}
	if texts != 1 {
		t.Errorf("%d text events, want the one complete text", texts)
	}
}
