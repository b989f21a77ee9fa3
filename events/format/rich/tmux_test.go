package rich

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

const spinnerClass = "[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]"

var (
	midStatus = regexp.MustCompile(`^` + spinnerClass + ` main claude-sonnet-5-5  Bash: cargo build  \d+\.\ds  in 65\.3k  cached 64%  ctx 51\.2k$`)
	midSub    = regexp.MustCompile(`^` + spinnerClass + ` explore#1 claude-haiku-4-5  查找所有调用 parse_line 的位置  Read: src/parse\.rs  \d+\.\ds  ctx 14\.1k$`)
	// After the subagent ended and Bash: cargo build finished.
	lateStatus = regexp.MustCompile(`^` + spinnerClass + ` main claude-sonnet-5-5  \d+\.\ds  in 65\.3k  cached 64%  ctx 51\.2k$`)
)

// checkMid checks the screen at "#pause mid" of testdata/tmux-run.jsonl: the
// first text with the lines after it above the panel, the subagent list
// with the running subagent and its tool, the status bar with the main
// agent's tool.
func checkMid(screen []string) error {
	want := []string{
		"[main] prompt 给 parse 模块补测试并修复失败",
		"[main] text I'll look around first.",
		"    Then write the tests.",
		"runtime warning: slow network",
		"[main] agent start explore#1 (haiku): 查找所有调用 parse_line 的位置",
		"[explore#1] tool Grep: parse_line",
		strings.Repeat("─", 100),
	}
	n := len(screen)
	if n != len(want)+2 || !reflect.DeepEqual(screen[:n-2], want) || !midSub.MatchString(screen[n-2]) || !midStatus.MatchString(screen[n-1]) {
		return fmt.Errorf("screen at mid:\n%s\nwant\n%s\n%s\n%s", strings.Join(screen, "\n"), strings.Join(want, "\n"), midSub, midStatus)
	}
	return nil
}

// checkLate checks everything (scrollback and screen) at "#pause late": the
// first text collapsed to its first line, the second in its text form with
// the lines after it, "0 running".
func checkLate(all []string) error {
	want := []string{
		"[main] prompt 给 parse 模块补测试并修复失败",
		"[main] text I'll look around first.",
		"runtime warning: slow network",
		"[main] agent start explore#1 (haiku): 查找所有调用 parse_line 的位置",
		"[explore#1] tool Grep: parse_line",
		"[explore#1] tool Read: src/parse.rs",
		"[explore#1] agent finished 12.4s claude-haiku-4-5  in 14.1k  out 85  cached 69%",
		"[main] tool Bash: cargo build",
		"[main] text Found 3 callers:",
		"    - src/main.rs",
		"    - src/lib.rs",
		"    … (+1 line)",
	}
	for i := 1; i <= 8; i++ {
		l := fmt.Sprintf("[main] tool Bash: cargo test step %d", i)
		if i == 3 {
			l += " (error)"
		}
		want = append(want, l)
	}
	want = append(want, "[main] text Tests written.", "[main] text Fixing    the failure.", strings.Repeat("─", 100), "0 running")
	n := len(all)
	if n != len(want)+1 || !reflect.DeepEqual(all[:n-1], want) || !lateStatus.MatchString(all[n-1]) {
		return fmt.Errorf("at late:\n%s\nwant\n%s\n%s", strings.Join(all, "\n"), strings.Join(want, "\n"), lateStatus)
	}
	return nil
}

type tmuxServer struct {
	t    *testing.T
	bin  string
	sock string
	conf string
}

func (tm *tmuxServer) run(args ...string) (string, error) {
	cmd := exec.Command(tm.bin, append([]string{"-u", "-S", tm.sock, "-f", tm.conf}, args...)...)
	env := []string{"LANG=C.UTF-8", "LC_ALL=C.UTF-8"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "LANG=") && !strings.HasPrefix(kv, "LC_ALL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (tm *tmuxServer) must(args ...string) string {
	tm.t.Helper()
	out, err := tm.run(args...)
	if err != nil {
		tm.t.Fatal(err)
	}
	return out
}

// capture returns the pane's lines, trailing empty ones removed; extra
// are capture-pane flags (-S - for the scrollback, -e for attributes).
func (tm *tmuxServer) capture(session string, extra ...string) []string {
	tm.t.Helper()
	out := tm.must(append([]string{"capture-pane", "-p", "-t", session}, extra...)...)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func (tm *tmuxServer) cursorVisible(session string) bool {
	return strings.TrimSpace(tm.must("display-message", "-p", "-t", session, "#{cursor_flag}")) == "1"
}

// waitFor polls cond until it holds or the deadline passes; then it
// fails with the last capture.
func (tm *tmuxServer) waitFor(session, what string, cond func() bool) {
	tm.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out waiting for %s; pane:\n%s", what, strings.Join(tm.capture(session, "-S", "-"), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startReplay runs the test binary as the replay program of
// testdata/tmux-run.jsonl in a new 100x30 session.
func (tm *tmuxServer) startReplay(session, syncDir, colorEnv string) {
	tm.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		tm.t.Fatal(err)
	}
	replay, err := filepath.Abs("testdata/tmux-run.jsonl")
	if err != nil {
		tm.t.Fatal(err)
	}
	cmd := "exec env " + colorEnv + " " + replayEnv + "=" + shellQuote(replay) + " " + syncEnv + "=" + shellQuote(syncDir) +
		" " + shellQuote(exe)
	tm.must("new-session", "-d", "-s", session, "-x", "100", "-y", "30", cmd)
	tm.t.Cleanup(func() {
		if err := os.WriteFile(filepath.Join(syncDir, "exit"), nil, 0o644); err != nil {
			tm.t.Error(err)
		}
	})
}

// TestTmux runs the rich renderer on a real terminal: tmux, 100 columns by
// 30 rows, fed testdata/tmux-run.jsonl with small delays. It checks the
// panel mid-run and, at the end, the scrollback, the cursor and that no
// panel is left. It fails, rather than skips, without tmux.
func TestTmux(t *testing.T) {
	bin, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("the rich terminal test needs tmux (apt-get install tmux): %v", err)
	}
	dir, err := os.MkdirTemp("", "rich-tmux-") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The server stays up between the sessions (a new-session while the
	// server exits after the last one fails) until kill-server.
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g exit-empty off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tm := &tmuxServer{t: t, bin: bin, sock: filepath.Join(dir, "sock"), conf: conf}
	tm.must("start-server")
	// kill-server fails only when the server is gone already, which is the goal.
	t.Cleanup(func() { _, _ = tm.run("kill-server") })
	want := readWant(t, "testdata/tmux-run.want.txt")

	t.Run("colour", func(t *testing.T) {
		tm.t = t
		syncDir := filepath.Join(dir, "colour")
		if err := os.Mkdir(syncDir, 0o755); err != nil {
			t.Fatal(err)
		}
		tm.startReplay("colour", syncDir, "-u NO_COLOR")

		tm.waitFor("colour", "the pause at mid", func() bool {
			if !exists(filepath.Join(syncDir, "mid.paused")) {
				return false
			}
			return checkMid(tm.capture("colour")) == nil
		})
		if tm.cursorVisible("colour") {
			t.Error("cursor visible while the panel is drawn")
		}
		esc := strings.Join(tm.capture("colour", "-e"), "\n")
		if !strings.Contains(esc, "\x1b[2m[main]") || !strings.Contains(esc, "\x1b[2m[explore#1]") || !strings.Contains(esc, "\x1b[2m───") {
			t.Errorf("labels and separator not dim:\n%q", esc)
		}
		if strings.Contains(esc, "\x1b[2mruntime warning") {
			t.Error("a stderr line is dim")
		}
		if err := os.WriteFile(filepath.Join(syncDir, "mid.go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}

		tm.waitFor("colour", "the pause at late", func() bool {
			if !exists(filepath.Join(syncDir, "late.paused")) {
				return false
			}
			return checkLate(tm.capture("colour", "-S", "-")) == nil
		})
		if err := os.WriteFile(filepath.Join(syncDir, "late.go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}

		tm.waitFor("colour", "the end", func() bool { return exists(filepath.Join(syncDir, "done")) })
		if msg, _ := os.ReadFile(filepath.Join(syncDir, "done")); len(msg) > 0 {
			t.Errorf("replay: %s", msg)
		}
		if got := tm.capture("colour", "-S", "-"); !reflect.DeepEqual(got, want) {
			t.Errorf("scrollback at the end:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !tm.cursorVisible("colour") {
			t.Error("cursor not restored")
		}
		screen := tm.capture("colour")
		for _, l := range screen {
			if strings.Contains(l, "───") || regexp.MustCompile(`^`+spinnerClass).MatchString(l) || l == "0 running" {
				t.Errorf("panel left on the screen: %q", l)
			}
		}
		if got := tm.must("display-message", "-p", "-t", "colour", "#{cursor_y} #{cursor_x}"); strings.TrimSpace(got) != fmt.Sprintf("%d 0", len(screen)) {
			t.Errorf("cursor at %s, want the start of the row after the end line (%d 0)", got, len(screen))
		}
		end := strings.Join(tm.capture("colour", "-e", "-S", "-"), "\n")
		if !strings.Contains(end, "\x1b[2m[main]") {
			t.Errorf("no dim label in the scrollback:\n%q", end)
		}
	})

	t.Run("NO_COLOR", func(t *testing.T) {
		tm.t = t
		syncDir := filepath.Join(dir, "nocolor")
		if err := os.Mkdir(syncDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"mid.go", "late.go"} {
			if err := os.WriteFile(filepath.Join(syncDir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tm.startReplay("nocolor", syncDir, "NO_COLOR=1")
		tm.waitFor("nocolor", "the end", func() bool { return exists(filepath.Join(syncDir, "done")) })
		if got := tm.capture("nocolor", "-S", "-"); !reflect.DeepEqual(got, want) {
			t.Errorf("scrollback at the end:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if esc := strings.Join(tm.capture("nocolor", "-e", "-S", "-"), "\n"); strings.Contains(esc, "\x1b[") {
			t.Errorf("SGR with NO_COLOR:\n%q", esc)
		}
		if !tm.cursorVisible("nocolor") {
			t.Error("cursor not restored")
		}
	})
}
