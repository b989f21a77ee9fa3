// Package adapterstest holds what the adapters' tests share: replaying raw
// output through an adapter and the aggregator as `agentrun translate`
// does, reading the real captures of testdata/real, checking the stream
// contract, and the body of every adapter's FuzzTranslate.
package adapterstest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/aggregator"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/mockmodel"
)

// Replay runs raw through a, line by line, then Close, Verdict and the
// aggregator's end, and returns the events and the verdict.
func Replay(a adapters.Adapter, runtime string, raw []byte, exit adapters.Exit) ([]events.Event, adapters.Verdict) {
	var out []events.Event
	agg := aggregator.New(func(e events.Event) error { out = append(out, e); return nil }, time.Now)
	agg.Start(&events.Start{Runtime: runtime, Network: events.Network{Allow: []string{}}, DenyRead: []string{},
		Argv: []string{}, Env: []string{}})
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		a.Translate(sc.Bytes(), agg.Add)
	}
	a.Close(agg.Add)
	v := a.Verdict(exit)
	status := events.StatusFinished
	if v.Failed {
		status = events.StatusFailed
	}
	code := exit.Code
	agg.Finish(aggregator.Outcome{Status: status, Detail: v.Detail, ExitCode: &code, Started: time.Now()})
	return out, v
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

// FuzzTranslate is the body of every adapter's FuzzTranslate: arbitrary
// output, any exit code, through a fresh adapter and the aggregator; no
// panic, end last, the contract intact. The seeds are the given lines and
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
		agg.Start(&events.Start{Runtime: runtime, Network: events.Network{Allow: []string{}}, DenyRead: []string{}, Argv: []string{}, Env: []string{}})
		a := newAdapter()
		for _, line := range bytes.Split(raw, []byte("\n")) {
			a.Translate(line, agg.Add)
		}
		a.Close(agg.Add)
		v := a.Verdict(adapters.Exit{Code: exitCode})
		status := events.StatusFinished
		if v.Failed {
			status = events.StatusFailed
		}
		agg.Finish(aggregator.Outcome{Status: status, Detail: v.Detail, Started: time.Now()})
		if errs := eventstest.Check(buf.Bytes()); len(errs) > 0 {
			t.Fatalf("contract broken: %v\n%s", errs, buf.Bytes())
		}
	})
}
