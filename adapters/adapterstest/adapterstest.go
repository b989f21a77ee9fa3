// Package adapterstest holds what the adapters' tests share: replaying raw
// output through an adapter and the aggregator as `agentrun translate`
// does, reading the real captures of testdata/real (whole, or every
// runtime's lines), checking the stream contract, and the body of every
// adapter's FuzzTranslate.
package adapterstest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// Replay runs raw through a, line by line, then Close, Verdict and the
// aggregator's end, as `agentrun translate` does, and returns the events
// and the verdict. The events must keep the contract (Check): every replay
// test checks its stream against the JSON Schema and the stream rules.
func Replay(t testing.TB, a adapters.Adapter, runtime string, raw []byte, exit adapters.Exit) ([]events.Event, adapters.Verdict) {
	t.Helper()
	var out []events.Event
	agg := aggregator.New(func(e events.Event) error { out = append(out, e); return nil }, time.Now)
	agg.Start(Start(runtime))
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		a.Translate(sc.Bytes(), agg.Add)
	}
	a.Close(agg.Add)
	v := a.Verdict(exit)
	agg.Finish(Outcome(runtime, v, exit))
	Check(t, out)
	return out, v
}

// Start is the start event of a replay, the one `agentrun translate` writes:
// no sandbox, full network, nothing denied.
func Start(runtime string) *events.Start {
	return &events.Start{Runtime: runtime, Sandbox: "none", Network: events.Network{Mode: "full", Allow: []string{}},
		DenyRead: []string{}, Cwd: "/", Argv: []string{}, Env: []string{}}
}

// Outcome is the end of a replay as the runner decides it from the
// adapter's verdict: finished, or failed with the runtime's message (or,
// without one, a sentence naming the exit); exit_code null when a signal
// ended the runtime.
func Outcome(runtime string, v adapters.Verdict, exit adapters.Exit) aggregator.Outcome {
	o := aggregator.Outcome{Status: events.StatusFinished, Started: time.Now()}
	if !exit.Signaled {
		o.ExitCode = events.Int(exit.Code)
	}
	if v.Failed {
		o.Status, o.Detail = events.StatusFailed, v.Detail
		if o.Detail == "" {
			o.Detail = fmt.Sprintf("%s failed with exit code %d and no error message", runtime, exit.Code)
		}
	}
	return o
}

// Types is the event types of evs, space-separated.
func Types(evs []events.Event) string {
	s := make([]string, 0, len(evs))
	for _, e := range evs {
		s = append(s, events.Head(e).Type)
	}
	return strings.Join(s, " ")
}

// End is the last event, which must be end.
func End(t testing.TB, evs []events.Event) *events.End {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	e, ok := evs[len(evs)-1].(*events.End)
	if !ok {
		t.Fatalf("last event is %T, not end", evs[len(evs)-1])
	}
	return e
}

// Check encodes evs and reports every break of the stream contract.
func Check(t testing.TB, evs []events.Event) {
	t.Helper()
	var buf bytes.Buffer
	for _, e := range evs {
		b, err := events.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	for _, err := range eventstest.Check(buf.Bytes()) {
		t.Error(err)
	}
}

// Capture is one saved run of testdata/real: NAME.jsonl (stdout),
// NAME.exit and NAME.ledger (what the mock served).
type Capture struct {
	Raw    []byte
	Exit   int
	Ledger []mockmodel.Call
}

// ReadCapture reads testdata/real/NAME.*.
func ReadCapture(t testing.TB, name string) Capture {
	t.Helper()
	base := filepath.Join("testdata", "real", name)
	raw, err := os.ReadFile(base + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(base + ".exit")
	if err != nil {
		t.Fatal(err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s.exit: %v", base, err)
	}
	ledger, err := mockmodel.ReadLedger(base + ".ledger")
	if err != nil {
		t.Fatal(err)
	}
	return Capture{Raw: raw, Exit: code, Ledger: ledger}
}

// RealLines are the non-empty lines of the real captures of the adapters
// in dirs (adapters/DIR/testdata/real/*.jsonl, read from an adapter's
// directory), of every adapter without dirs: for the tests that hold a
// decoder to encoding/json (every runtime's output is input to every
// adapter too).
func RealLines(t testing.TB, dirs ...string) [][]byte {
	t.Helper()
	if len(dirs) == 0 {
		dirs = []string{"*"}
	}
	var lines [][]byte
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join("..", dir, "testdata", "real", "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no captures of %s: %v", dir, err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range bytes.Split(data, []byte("\n")) {
				if len(l) > 0 {
					lines = append(lines, l)
				}
			}
		}
	}
	return lines
}

// FuzzTranslate is the body of every adapter's FuzzTranslate: arbitrary
// output, any exit code, through a fresh adapter and the aggregator; no
// panic, end last, the contract intact (every event valid against the JSON
// Schema, the stream rules kept). The seeds are the given lines and
// the real captures of testdata/real.
func FuzzTranslate(f *testing.F, runtime string, newAdapter func() adapters.Adapter, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s), 0)
	}
	f.Add([]byte(strings.Join(seeds, "\n")), 1)
	captures, _ := filepath.Glob(filepath.Join("testdata", "real", "*.jsonl"))
	for _, c := range captures {
		if b, err := os.ReadFile(c); err == nil && len(b) < 256<<10 {
			f.Add(b, 0)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, exitCode int) {
		var buf bytes.Buffer
		w := events.NewWriter(&buf)
		agg := aggregator.New(w.Write, time.Now)
		agg.Start(Start(runtime))
		a := newAdapter()
		for _, line := range bytes.Split(raw, []byte("\n")) {
			a.Translate(line, agg.Add)
		}
		a.Close(agg.Add)
		exit := adapters.Exit{Code: exitCode}
		agg.Finish(Outcome(runtime, a.Verdict(exit), exit))
		if errs := eventstest.Check(buf.Bytes()); len(errs) > 0 {
			t.Fatalf("contract broken: %v\n%s", errs, buf.Bytes())
		}
	})
}
