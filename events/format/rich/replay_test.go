package rich

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentrun-dev/agentrun/events"
)

// The tmux test runs this test binary itself as the program under test:
// with replayEnv set, TestMain replays that file through a real rich
// renderer on the terminal instead of running tests.
const (
	replayEnv = "AGENTRUN_RICH_REPLAY" // the replay file
	syncEnv   = "AGENTRUN_RICH_SYNC"   // directory of the pause and done files
	delayEnv  = "AGENTRUN_RICH_DELAY"  // milliseconds between steps
)

func TestMain(m *testing.M) {
	if path := os.Getenv(replayEnv); path != "" {
		os.Exit(replayMain(path, os.Getenv(syncEnv)))
	}
	// The live panel's loop is a goroutine per renderer: none may outlive
	// its test.
	goleak.VerifyTestMain(m)
}

// A replay file is an event stream, one event per line, with directive
// lines between the events:
//
//	#stderr "GO STRING"   write the string to the renderer's StderrWriter
//	#pause NAME           create SYNC/NAME.paused, wait for SYNC/NAME.go
type replayStep struct {
	event  events.Event
	stderr *string
	pause  string
}

func parseReplay(path string) ([]replayStep, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var steps []replayStep
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "#stderr "):
			s, err := strconv.Unquote(strings.TrimPrefix(line, "#stderr "))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
			steps = append(steps, replayStep{stderr: &s})
		case strings.HasPrefix(line, "#pause "):
			steps = append(steps, replayStep{pause: strings.TrimPrefix(line, "#pause ")})
		default:
			e, err := events.Decode([]byte(line))
			if err != nil || e == nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
			steps = append(steps, replayStep{event: e})
		}
	}
	return steps, sc.Err()
}

// runReplay feeds the steps, delay apart.
func runReplay(steps []replayStep, event func(events.Event) error, stderr io.Writer, pause func(string), delay time.Duration) error {
	for _, s := range steps {
		switch {
		case s.event != nil:
			if err := event(s.event); err != nil {
				return err
			}
			time.Sleep(delay)
		case s.stderr != nil:
			if _, err := io.WriteString(stderr, *s.stderr); err != nil {
				return err
			}
		case s.pause != "":
			pause(s.pause)
		}
	}
	return nil
}

// waitFile waits up to a minute for path to exist.
func waitFile(path string) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// replayMain is the program the tmux test runs. After Close it creates
// SYNC/done (holding the error, if any) and waits for SYNC/exit, so that
// the pane stays for capture-pane.
func replayMain(path, syncDir string) int {
	steps, err := parseReplay(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	delay := 20 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv(delayEnv)); err == nil {
		delay = time.Duration(ms) * time.Millisecond
	}
	r := New(os.Stdout, os.Stderr, Options{})
	pause := func(name string) {
		if syncDir == "" {
			return
		}
		// Unable to signal the pause, the program goes on: the test,
		// waiting for the .paused file, then fails naming it.
		if err := os.WriteFile(filepath.Join(syncDir, name+".paused"), nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		waitFile(filepath.Join(syncDir, name+".go"))
	}
	err = runReplay(steps, r.Event, r.StderrWriter(), pause, delay)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if syncDir == "" {
		return 0
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if err := os.WriteFile(filepath.Join(syncDir, "done"), []byte(msg), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	waitFile(filepath.Join(syncDir, "exit"))
	return 0
}

func readWant(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// The tmux test's replay through the emulator, at the same size: the same
// end result as on the real terminal.
func TestReplayInVT(t *testing.T) {
	steps, err := parseReplay("testdata/tmux-run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 100, 30, false)
	var mid, late []string
	pause := func(name string) {
		h.clock.tick()
		switch name {
		case "mid":
			mid = h.term.lines()
		case "late":
			late = h.term.all()
		}
	}
	if err := runReplay(steps, h.l.event, stderrWriter{h.l}, pause, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.l.close(); err != nil {
		t.Fatal(err)
	}
	if got, want := h.term.all(), readWant(t, "testdata/tmux-run.want.txt"); !reflect.DeepEqual(got, want) {
		t.Errorf("at the end:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := checkMid(mid); err != nil {
		t.Error(err)
	}
	if err := checkLate(late); err != nil {
		t.Error(err)
	}
}
