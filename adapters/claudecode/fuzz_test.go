package claudecode

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/aggregator"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
)

// FuzzTranslate feeds arbitrary output through the adapter and the
// aggregator: no panic, end always last, the contract intact.
func FuzzTranslate(f *testing.F) {
	for _, l := range []string{seedInit, seedPrompt, seedBash, seedBashOK, seedText, seedResult} {
		f.Add([]byte(l), 0)
	}
	f.Add([]byte(strings.Join([]string{seedInit, seedPrompt, seedBash, seedBashOK, seedText, seedResult}, "\n")), 1)
	captures, _ := filepath.Glob("testdata/real/*.jsonl")
	for _, c := range captures {
		if b, err := os.ReadFile(c); err == nil && len(b) < 256<<10 {
			f.Add(b, 0)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, exitCode int) {
		var buf bytes.Buffer
		w := events.NewWriter(&buf)
		agg := aggregator.New(w.Write, time.Now)
		agg.Start(&events.Start{Runtime: Name, Network: events.Network{Allow: []string{}}, DenyRead: []string{}, Argv: []string{}, Env: []string{}})
		a := New()
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
