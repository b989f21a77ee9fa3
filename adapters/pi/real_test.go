package pi

import (
	"math"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// The prices of the captures' models.json (USD per million tokens).
const priceIn, priceOut, priceCacheRead = 1.25, 10.0, 0.125

// TestRealCaptures replays the real pi 0.73.1 output of the mock scenarios
// (testdata/real, see its README) and checks the unified events: sequence,
// the contract, usage against what the mock served (one usage per call),
// pi's own cost, result and verdict. The live versions of these runs are in
// test/cli.
func TestRealCaptures(t *testing.T) {
	tests := []struct {
		name   string
		types  string
		failed bool
		detail string
		result string
		check  func(t *testing.T, evs []events.Event)
	}{
		{name: "tool", types: "start prompt usage tool_start tool text usage end", result: "Done: wrote hello.txt",
			check: func(t *testing.T, evs []events.Event) {
				for _, e := range evs {
					if tl, ok := e.(*events.Tool); ok && (tl.Name != "bash" || tl.Summary != "bash: echo hello > hello.txt" || tl.Denied || tl.Error == nil || *tl.Error) {
						t.Errorf("tool = %+v", tl)
					}
				}
			}},
		{name: "parallel", types: "start prompt text usage tool_start tool_start tool tool text usage end",
			result: "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"},
		// pi exits 0 on API errors; the error is the last assistant message's.
		{name: "error401", types: "start prompt end", failed: true, detail: "401 mockmodel: Incorrect API key provided."},
		{name: "error500", types: "start prompt end", failed: true, detail: "500 The server had an error while processing your request. Sorry about that!"},
		// SIGINT: exit 130, no closing events; the text streamed so far is
		// what the agent wrote.
		{name: "interrupt", types: "start prompt text end", failed: true, result: "slow slow slow "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := adapterstest.ReadCapture(t, tt.name)
			evs, v := adapterstest.Replay(t, New(), Name, c.Raw, adapters.Exit{Code: c.Exit})
			if got := adapterstest.Types(evs); got != tt.types {
				t.Errorf("types:\n got %s\nwant %s", got, tt.types)
			}
			if v.Failed != tt.failed || v.Detail != tt.detail {
				t.Errorf("verdict %+v, want failed=%v detail %q", v, tt.failed, tt.detail)
			}
			adapterstest.Check(t, evs)
			for _, err := range mockmodel.VerifyUsage(evs, c.Ledger, false) {
				t.Error(err)
			}
			end := adapterstest.End(t, evs)
			if (tt.result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != tt.result) {
				t.Errorf("result %v, want %q", end.Result, tt.result)
			}
			if p := evs[1].(*events.Prompt); !strings.HasPrefix(p.Text, "scenario:") || len(p.Images) != 0 {
				t.Errorf("prompt %+v", p)
			}
			// Every call's cost is pi's, from the prices of models.json.
			var sum float64
			for _, e := range evs {
				if u, ok := e.(*events.Usage); ok {
					want := (float64(*u.InputTokens)*priceIn + float64(*u.OutputTokens)*priceOut + float64(*u.CacheReadTokens)*priceCacheRead) / 1e6
					if u.CostUSD == nil || math.Abs(*u.CostUSD-want) > 1e-12 || u.Model == nil || *u.Model != "gpt-test" {
						t.Errorf("usage model %v cost %v, want gpt-test and %g", u.Model, u.CostUSD, want)
					}
					sum += *u.CostUSD
				}
			}
			if sum > 0 && (end.Usage.CostUSD == nil || math.Abs(*end.Usage.CostUSD-sum) > 1e-12) {
				t.Errorf("end cost %v, want the sum of the calls' %g", end.Usage.CostUSD, sum)
			}
			if tt.check != nil {
				tt.check(t, evs)
			}
		})
	}
}
