//go:build e2e

package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestOpenAIRuntimeAgentRuns: the same road for the other runtimes: the
// real pi, codex and dsh CLIs in the Pod, in bubblewrap, against the mock's
// Chat Completions and Responses APIs through the filter proxy; the status
// has the mock's token counts, the cost (pi's from the prices the run
// gives it; codex and dsh report none) and the result.
func TestOpenAIRuntimeAgentRuns(t *testing.T) {
	for _, tt := range []struct {
		runtime string
		cost    bool
		// keyEnv and baseURLEnv are the runtime's variables of the API key
		// and the endpoint.
		keyEnv, baseURLEnv string
		// verify ties the stream's usage to the mock's ledger: pi reports
		// every call, codex once per turn.
		verify func([]events.Event, []mockmodel.Call) []error
	}{
		{runtime: "pi", cost: true, keyEnv: "OPENAI_API_KEY", baseURLEnv: "OPENAI_BASE_URL",
			verify: func(s []events.Event, l []mockmodel.Call) []error { return mockmodel.VerifyUsage(s, l, false) }},
		{runtime: "codex", keyEnv: "OPENAI_API_KEY", baseURLEnv: "OPENAI_BASE_URL", verify: mockmodel.VerifyTurnUsage},
		// dsh (per step, like pi) runs under the Node 24 the image carries
		// for it.
		{runtime: "dsh", keyEnv: "DEEPSEEK_API_KEY", baseURLEnv: "DEEPSEEK_BASE_URL",
			verify: func(s []events.Event, l []mockmodel.Call) []error { return mockmodel.VerifyUsage(s, l, false) }},
	} {
		t.Run(tt.runtime, func(t *testing.T) {
			t.Parallel()
			srv, port := startMock(t, mockmodel.Options{})
			name := "e2e-" + tt.runtime
			applied := agentRun{name: name, runtime: tt.runtime, model: "gpt-test", timeout: "5m", port: port,
				prompt: "scenario:tool write it", keyEnv: tt.keyEnv,
				env: map[string]string{
					tt.baseURLEnv:            "http://" + mockHost + ":" + strconv.Itoa(port) + "/v1",
					"AGENTRUN_MODEL_RETRIES": "1",
					"AGENTRUN_PI_COST":       "input=1.25,output=10,cache_read=0.125,cache_write=0",
				}}.apply(t)
			run := waitEnded(t, name, 3*time.Minute)
			t.Logf("%s %s after apply", run.Status.Phase, time.Since(applied).Round(100*time.Millisecond))
			st := run.Status
			if st.Phase != "Succeeded" || st.EndStatus != "finished" || st.ExitCode == nil || *st.ExitCode != 0 {
				t.Errorf("phase %s endStatus %s exitCode %v detail %q", st.Phase, st.EndStatus, st.ExitCode, st.Detail)
			}
			if st.Result == nil || *st.Result != "Done: wrote hello.txt" {
				t.Errorf("result %v", st.Result)
			}
			stream, end := eventLog(t, st.PodName)
			for _, err := range tt.verify(stream, srv.Ledger()) {
				t.Error(err)
			}
			if len(srv.Ledger()) != 2 {
				t.Errorf("the mock served %d calls, want 2", len(srv.Ledger()))
			}
			u := st.Usage
			if u == nil || u.InputTokens == nil || end.Usage.InputTokens == nil || *u.InputTokens != *end.Usage.InputTokens ||
				u.OutputTokens == nil || end.Usage.OutputTokens == nil || *u.OutputTokens != *end.Usage.OutputTokens {
				t.Fatalf("status usage %+v, end usage %+v", u, end.Usage)
			}
			if tt.cost {
				cost, err := strconv.ParseFloat(u.CostUSD, 64)
				if err != nil || end.Usage.CostUSD == nil || cost != *end.Usage.CostUSD || cost <= 0 {
					t.Errorf("status cost %q, end cost %v", u.CostUSD, end.Usage.CostUSD)
				}
			} else if u.CostUSD != "" || end.Usage.CostUSD != nil {
				t.Errorf("%s reports no cost, yet status %q end %v", tt.runtime, u.CostUSD, end.Usage.CostUSD)
			}
			if st.Counters == nil || st.Counters.Tools != 1 {
				t.Errorf("counters %+v, want one tool", st.Counters)
			}
		})
	}
}
