package adapterstest

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// CommonScenarios are the mock scenarios every runtime has a real capture
// of in its testdata/real (adapters/all checks it for every registered
// runtime): a tool call, two calls in one reply, the API refusing the key,
// the API failing, and SIGINT during a slow reply.
var CommonScenarios = []string{"tool", "parallel", "error401", "error500", "interrupt"}

// Captures is the capture replay of one runtime: every capture of its
// testdata/real, replayed through a fresh adapter of the registered
// runtime as `agentrun translate` does, against its row of Cases. A
// runtime's TestRealCaptures is one Captures value and its Run; what every
// runtime's replay must keep is here, once.
type Captures struct {
	// Runtime is the registered name (adapters.Lookup).
	Runtime string
	// ReplayModel is the --model `agentrun translate` is given, for an
	// adapter that is an adapters.Replayer ("" = none).
	ReplayModel string
	// TurnUsage: the CLI reports the main agent's usage once per turn
	// (mockmodel.VerifyTurnUsage), not once per model call
	// (mockmodel.VerifyUsage).
	TurnUsage bool
	// DetailPrefix: a case's Detail is the start of the verdict's detail,
	// not all of it.
	DetailPrefix bool
	// UsageModel is the model every usage event must name ("": not checked,
	// nor is its cost: the CLI names each call's model itself).
	UsageModel string
	// Prices are the CLI's own prices (USD per million tokens) from which
	// it reports each call's cost; nil: every usage's cost is null.
	Prices *Prices
	// Cases are what each capture must translate to: one per
	// testdata/real/NAME.jsonl, no more, no less.
	Cases []CaptureCase
}

// Prices are a model's prices in USD per million tokens.
type Prices struct{ Input, Output, CacheRead float64 }

// CaptureCase is what one capture, testdata/real/NAME.*, translates to.
type CaptureCase struct {
	Name string
	// Types is the event types in order (Types).
	Types string
	// Failed and Detail are the adapter's verdict (Detail a prefix with
	// Captures.DetailPrefix).
	Failed bool
	Detail string
	// Result is end.result ("" = null).
	Result string
	// NullOutput: the run reported no output counts for the main agent
	// (mockmodel.VerifyUsage's nullMainOutput).
	NullOutput bool
	// Check checks what else the capture shows.
	Check func(t *testing.T, evs []events.Event)
}

// Run replays every case's capture in a subtest, and fails for a capture
// in testdata/real that has no case.
func (c Captures) Run(t *testing.T) {
	t.Helper()
	rt, err := adapters.Lookup(c.Runtime)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "real", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in testdata/real (%v)", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		if !slices.ContainsFunc(c.Cases, func(cc CaptureCase) bool { return cc.Name == name }) {
			t.Errorf("%s: the capture has no case in %s's Captures: say what it must translate to", f, c.Runtime)
		}
	}
	for _, cc := range c.Cases {
		t.Run(cc.Name, func(t *testing.T) {
			capture := ReadCapture(t, cc.Name)
			a := rt.New()
			if r, ok := a.(adapters.Replayer); ok && c.ReplayModel != "" {
				r.Replay(adapters.LaunchSpec{Model: c.ReplayModel})
			}
			evs, v := Replay(t, a, c.Runtime, capture.Raw, adapters.Exit{Code: capture.Exit})
			c.check(t, cc, capture, evs, v)
		})
	}
}

// check is what every replay must keep, then the case's own Check.
func (c Captures) check(t *testing.T, cc CaptureCase, capture Capture, evs []events.Event, v adapters.Verdict) {
	t.Helper()
	if got := Types(evs); got != cc.Types {
		t.Errorf("types:\n got %s\nwant %s", got, cc.Types)
	}
	if detailOK := v.Detail == cc.Detail || c.DetailPrefix && strings.HasPrefix(v.Detail, cc.Detail); v.Failed != cc.Failed || !detailOK {
		t.Errorf("verdict %+v, want failed=%v detail %q (prefix %v)", v, cc.Failed, cc.Detail, c.DetailPrefix)
	}
	// Usage against what the mock served.
	var errs []error
	if c.TurnUsage {
		errs = mockmodel.VerifyTurnUsage(evs, capture.Ledger)
	} else {
		errs = mockmodel.VerifyUsage(evs, capture.Ledger, cc.NullOutput)
	}
	for _, err := range errs {
		t.Error(err)
	}
	end := End(t, evs)
	if (cc.Result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != cc.Result) {
		t.Errorf("result %v, want %q", show(end.Result), cc.Result)
	}
	// The prompt event, when there is one, is the run's prompt.
	if p := eventstest.Find[*events.Prompt](evs); p != nil && (!strings.HasPrefix(p.Text, "scenario:") || len(p.Images) != 0) {
		t.Errorf("prompt %+v", p)
	}
	if c.UsageModel != "" {
		c.checkUsageModelAndCost(t, evs, end)
	}
	if cc.Check != nil {
		cc.Check(t, evs)
	}
}

// checkUsageModelAndCost: every usage names UsageModel, and its cost is
// null or, with Prices, the CLI's own from them; end's cost is the sum.
func (c Captures) checkUsageModelAndCost(t *testing.T, evs []events.Event, end *events.End) {
	t.Helper()
	var sum float64
	for _, e := range evs {
		u, ok := e.(*events.Usage)
		if !ok {
			continue
		}
		if c.Prices == nil {
			if u.Model == nil || *u.Model != c.UsageModel || u.CostUSD != nil {
				t.Errorf("usage model %v cost %v, want %s and no cost", show(u.Model), show(u.CostUSD), c.UsageModel)
			}
			continue
		}
		want := (float64(*u.InputTokens)*c.Prices.Input + float64(*u.OutputTokens)*c.Prices.Output + float64(*u.CacheReadTokens)*c.Prices.CacheRead) / 1e6
		if u.CostUSD == nil || math.Abs(*u.CostUSD-want) > 1e-12 || u.Model == nil || *u.Model != c.UsageModel {
			t.Errorf("usage model %v cost %v, want %s and %g", show(u.Model), show(u.CostUSD), c.UsageModel, want)
			continue
		}
		sum += *u.CostUSD
	}
	if sum > 0 && (end.Usage.CostUSD == nil || math.Abs(*end.Usage.CostUSD-sum) > 1e-12) {
		t.Errorf("end cost %v, want the sum of the calls' %g", show(end.Usage.CostUSD), sum)
	}
}

// MissingCommonCaptures lists the CommonScenarios that dir/testdata/real has
// no capture of.
func MissingCommonCaptures(dir string) []string {
	var missing []string
	for _, s := range CommonScenarios {
		if _, err := os.Stat(filepath.Join(dir, "testdata", "real", s+".jsonl")); err != nil {
			missing = append(missing, s)
		}
	}
	return missing
}

// show is what p points at, or null.
func show[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}
