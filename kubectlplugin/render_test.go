package kubectlplugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/agentrun-dev/agentrun/adapters/claudecode"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/runner"
)

// The rendering of a log, without a cluster: follower.read on a log
// source that serves a stream, as the events sidecar's log holds it.

// readLog runs one follower.read of data in the given format.
func readLog(t *testing.T, data []byte, formatName string, skip int, final bool) (stdout, stderr string, sawEnd bool, lines int) {
	t.Helper()
	logs := newFakeLogs()
	logs.set("pod", fakeLog{data: data})
	var out, errOut bytes.Buffer
	e := &Env{Stdout: &out, Stderr: &errOut}
	f := newFollower(e, &kube{ns: "ns", logs: logs}, "run", formatName, false)
	sawEnd, lines, err := f.read(context.Background(), "pod", skip, false, final)
	if err != nil {
		t.Fatal(err)
	}
	f.out.close()
	if got := logs.opened(); len(got) != 1 || got[0] != "pod/events follow=false" {
		t.Errorf("opened %v", got)
	}
	return out.String(), errOut.String(), sawEnd, lines
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seed is the stream of docs/events.md's example, whose text format
// events/format/text keeps as a hand-written golden.
const seed = "../events/format/text/testdata/seed-example"

// TestRenderTextGoldens: every stream of events/format/text's tests, read as a
// log, renders to that package's golden text (rich on a pipe is text).
func TestRenderTextGoldens(t *testing.T) {
	inputs, err := filepath.Glob("../events/format/text/testdata/*.jsonl")
	if err != nil || len(inputs) < 10 {
		t.Fatalf("events/format/text's testdata: %v %v", inputs, err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".jsonl")
		for _, formatName := range []string{formatText, formatRich} {
			t.Run(name+"/"+formatName, func(t *testing.T) {
				out, errOut, sawEnd, _ := readLog(t, readFile(t, in), formatName, 0, true)
				if want := string(readFile(t, strings.TrimSuffix(in, ".jsonl")+".txt")); out != want {
					t.Errorf("got\n%s\nwant\n%s", out, want)
				}
				if !sawEnd || errOut != "" {
					t.Errorf("sawEnd %t, stderr %q", sawEnd, errOut)
				}
			})
		}
	}
}

// TestRenderRealStreams: the event streams of real claude-code captures
// (adapters/claudecode/testdata/real, translated as `agentrun translate`
// does) render through the log exactly as `agentrun render` renders them,
// and jsonl passes them through byte for byte.
func TestRenderRealStreams(t *testing.T) {
	captures, err := filepath.Glob("../adapters/claudecode/testdata/real/*.jsonl")
	if err != nil || len(captures) < 3 {
		t.Fatalf("real captures: %v %v", captures, err)
	}
	for _, capture := range captures {
		t.Run(filepath.Base(capture), func(t *testing.T) {
			var stream bytes.Buffer
			if _, err := runner.Translate(runner.TranslateOptions{Runtime: "claude-code"}, bytes.NewReader(readFile(t, capture)),
				format.NewJSONL(&stream), io.Discard); err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(stream.Bytes(), []byte("\n")); n < 3 {
				t.Fatalf("the translated stream has %d events", n)
			}
			var want bytes.Buffer
			r := text.New(&want, text.Options{})
			rd := events.NewReader(bytes.NewReader(stream.Bytes()))
			for {
				e, err := rd.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Event(e); err != nil {
					t.Fatal(err)
				}
			}
			r.Close()
			out, errOut, sawEnd, lines := readLog(t, stream.Bytes(), formatText, 0, true)
			if out != want.String() || !sawEnd || errOut != "" {
				t.Errorf("text: sawEnd %t stderr %q\ngot\n%s\nwant\n%s", sawEnd, errOut, out, want.String())
			}
			if n := bytes.Count(stream.Bytes(), []byte("\n")); lines != n {
				t.Errorf("read %d lines of %d", lines, n)
			}
			if out, _, sawEnd, _ := readLog(t, stream.Bytes(), formatJSONL, 0, true); out != stream.String() || !sawEnd {
				t.Errorf("jsonl is not the stream as it is (end %t)", sawEnd)
			}
		})
	}
}

// TestReadLog: where a read starts and stops.
func TestReadLog(t *testing.T) {
	stream := readFile(t, seed+".jsonl")
	lines := strings.SplitAfter(string(stream), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	if len(lines) != 11 {
		t.Fatalf("%d lines", len(lines))
	}
	endLine := lines[len(lines)-1]
	withoutEnd := strings.Join(lines[:len(lines)-1], "")

	t.Run("the end event is the last line read", func(t *testing.T) {
		after := string(stream) + `{"schema":1,"type":"text","time":"2026-10-04T13:00:40.000Z","parent":null,"text":"after the end"}` + "\n"
		out, _, sawEnd, n := readLog(t, []byte(after), formatJSONL, 0, true)
		if out != string(stream) || !sawEnd || n != 11 {
			t.Errorf("sawEnd %t after %d lines, output\n%s", sawEnd, n, out)
		}
	})
	t.Run("skip the lines shown before a reconnect", func(t *testing.T) {
		out, _, sawEnd, n := readLog(t, stream, formatJSONL, 4, true)
		if out != strings.Join(lines[4:], "") || !sawEnd || n != 11 {
			t.Errorf("sawEnd %t after %d lines, output\n%s", sawEnd, n, out)
		}
	})
	t.Run("a last line being written is left for the next read", func(t *testing.T) {
		cut := withoutEnd + strings.TrimSuffix(endLine, "\n")
		out, _, sawEnd, n := readLog(t, []byte(cut), formatJSONL, 0, false)
		if out != withoutEnd || sawEnd || n != 10 {
			t.Errorf("sawEnd %t after %d lines, output\n%s", sawEnd, n, out)
		}
	})
	t.Run("a terminated container's last line without newline is read", func(t *testing.T) {
		cut := withoutEnd + strings.TrimSuffix(endLine, "\n")
		out, _, sawEnd, n := readLog(t, []byte(cut), formatText, 0, true)
		if out != string(readFile(t, seed+".txt")) || !sawEnd || n != 10 {
			t.Errorf("sawEnd %t after %d complete lines, output\n%s", sawEnd, n, out)
		}
	})
	t.Run("a bad line is reported and skipped", func(t *testing.T) {
		bad := strings.Join(lines[:2], "") + "not an event\n" + "\n" + strings.Join(lines[2:], "")
		out, errOut, sawEnd, _ := readLog(t, []byte(bad), formatText, 0, true)
		if out != string(readFile(t, seed+".txt")) || !sawEnd {
			t.Errorf("sawEnd %t, output\n%s", sawEnd, out)
		}
		if !strings.HasPrefix(errOut, "line 3 of the event log: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("stderr %q", errOut)
		}
	})
	t.Run("an event type of a newer runner passes in jsonl and is skipped in text", func(t *testing.T) {
		future := `{"schema":1,"type":"checkpoint","time":"2026-10-04T13:00:10.000Z"}` + "\n"
		withFuture := strings.Join(lines[:3], "") + future + strings.Join(lines[3:], "")
		if out, errOut, _, _ := readLog(t, []byte(withFuture), formatText, 0, true); out != string(readFile(t, seed+".txt")) || errOut != "" {
			t.Errorf("text: stderr %q, output\n%s", errOut, out)
		}
		if out, _, _, _ := readLog(t, []byte(withFuture), formatJSONL, 0, true); out != withFuture {
			t.Errorf("jsonl output\n%s", out)
		}
	})
	t.Run("a log without its end", func(t *testing.T) {
		out, _, sawEnd, n := readLog(t, []byte(withoutEnd), formatJSONL, 0, true)
		if out != withoutEnd || sawEnd || n != 10 {
			t.Errorf("sawEnd %t after %d lines", sawEnd, n)
		}
	})
}
