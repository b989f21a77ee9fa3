package cli

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	_ "github.com/agentrun-dev/agentrun/adapters/all"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// cliRuntimes are the real CLIs these tests run: one row per registered
// runtime (TestEveryRuntimeHasARow), each declared in its runtime's file.
// TestScenarios, TestInterruptAndTimeout, the credential and the loopback
// tests run every row; what only one CLI does is a field of its row or a
// small test of its own.
var cliRuntimes = []*cliRuntime{&claudeCodeCLI, &codexCLI, &piCLI, &dshCLI}

// cliRuntime is how one real CLI is pointed at the mock model, and what
// its runs show.
type cliRuntime struct {
	name  string // the --runtime value
	model string // the --model value
	// keyVar and baseVar are the CLI's variables for the API key and the
	// base URL, basePath what follows host:port in the base URL, retries
	// the --env that holds the CLI to one retry (short error scenarios).
	keyVar, baseVar, basePath, retries string
	// env are more --env values of every mock run.
	env []string
	// echoesPrompt: the CLI writes the prompt back (else agentrun writes
	// the prompt event itself, and a replay of --raw has none).
	echoesPrompt bool
	// shellScrubsKey: the CLI's tools do not inherit the key variable (dsh
	// drops every name matching KEY|PASSWORD|SECRET|TOKEN from its
	// subprocesses), so the agent's curl sends no key at all.
	shellScrubsKey bool
	// runTimeout caps one run (default a minute: each run takes seconds; a
	// CLI that cannot reach the mock retries for minutes).
	runTimeout time.Duration

	// scenarios are the mock scenarios TestScenarios runs, and what each
	// must show.
	scenarios []cliScenario
	// networkInTypes: the types of a scenario are checked with the
	// proxy's one network event right after start (else without network
	// events, and checkNetwork checks them); a run in which the CLI cut
	// and retried a model call itself is logged, its types not checked.
	networkInTypes bool
	detailPrefix   bool // a scenario's detail is the start of end.detail
	turnUsage      bool // one usage per turn (mockmodel.VerifyTurnUsage)
	// checkStart checks the start (and prompt) events of a scenario's run.
	checkStart func(t *testing.T, rt *cliRuntime, r *result)
	// checkCost checks the usage events' model and the costs of a
	// scenario's run.
	checkCost func(t *testing.T, rt *cliRuntime, r *mockRun, status string)

	// interruptAfter is when TestInterruptAndTimeout signals agentrun, and
	// timeout its --timeout in seconds: both while the slow reply streams.
	interruptAfter time.Duration
	timeout        int
	// interrupted and timedOut check what else the CLI's interrupted or
	// timed-out run shows (nil: nothing).
	interrupted, timedOut func(t *testing.T, r *mockRun)
}

// cliScenario is one mock scenario's run and what it must show.
type cliScenario struct {
	scenario string
	// types are the event types; " | " between orders timing may give; ""
	// when timing makes the order vary (see check).
	types    string
	status   string // end.status: finished (agentrun exits 0) or failed (1)
	exitCode int    // the CLI's, in end.exit_code
	result   string // "" = null
	detail   string
	calls    [2]int // the least and most model calls the mock served; 0, 0: not checked
	check    func(t *testing.T, r *mockRun)
}

// TestEveryRuntimeHasARow: every registered runtime (adapters/all) has a
// row in cliRuntimes, with the scenarios every runtime's CLI is run
// through.
func TestEveryRuntimeHasARow(t *testing.T) {
	var rows []string
	for _, rt := range cliRuntimes {
		rows = append(rows, rt.name)
		if _, err := adapters.Lookup(rt.name); err != nil {
			t.Errorf("cliRuntimes has a row for %s: %v", rt.name, err)
		}
		for _, s := range []string{"tool", "parallel", "error401", "error500"} {
			if !slices.ContainsFunc(rt.scenarios, func(c cliScenario) bool { return c.scenario == s }) {
				t.Errorf("the row of %s has no scenario %s", rt.name, s)
			}
		}
		if rt.interruptAfter == 0 || rt.timeout == 0 {
			t.Errorf("the row of %s has no interruptAfter or timeout", rt.name)
		}
	}
	for _, name := range adapters.Names() {
		if !slices.Contains(rows, name) {
			t.Errorf("runtime %s has no row in cliRuntimes (test/cli/runtimes_test.go): add one, declared in test/cli/<runtime>_test.go", name)
		}
	}
}

// binEnv is the variable that names the CLI's executable, as the runner
// reads it.
func (rt *cliRuntime) binEnv() string {
	r, _ := adapters.Lookup(rt.name)
	return r.BinaryEnv
}

// bin is the real CLI.
func (rt *cliRuntime) bin(t *testing.T) string {
	t.Helper()
	r, err := adapters.Lookup(rt.name)
	if err != nil {
		t.Fatal(err)
	}
	return cliBin(t, rt.name, r.BinaryEnv, r.Binary)
}

// withModel is the row with another --model.
func (rt *cliRuntime) withModel(model string) *cliRuntime {
	c := *rt
	c.model = model
	return &c
}

// mockArgs point the CLI at srv in the sandbox: through the filter proxy,
// by a test host name routed to the mock with --add-host and allowed
// explicitly, as in production an in-cluster model gateway would be. The
// base URL and the key reach the CLI through --env.
func (rt *cliRuntime) mockArgs(srv *mockmodel.Server) []string {
	u, _ := url.Parse(srv.URL())
	return []string{"--runtime", rt.name, "--model", rt.model,
		"--env", rt.keyVar + "=test-key", "--env", rt.baseVar + "=http://" + mockHost + ":" + u.Port() + rt.basePath,
		"--env", rt.retries,
		"--add-host", mockHost + "=127.0.0.1", "--allow-host", mockHost + ":" + u.Port(), "--allow-host", "127.0.0.1:" + u.Port()}
}

// loopbackArgs point the CLI at a model on this machine's loopback at
// base, the obvious way: its base URL's --env.
func (rt *cliRuntime) loopbackArgs(base, ws string, extra ...string) []string {
	a := []string{"--runtime", rt.name, "--model", rt.model, "--cwd", ws}
	for _, e := range rt.loopbackEnv(base) {
		a = append(a, "--env", e)
	}
	return append(a, extra...)
}

// loopbackEnv are the --env values of loopbackArgs.
func (rt *cliRuntime) loopbackEnv(base string) []string {
	return []string{rt.keyVar + "=test-key", rt.retries, rt.baseVar + "=" + base + rt.basePath}
}

// run runs the CLI through agentrun in the sandbox against a fresh mock
// started with opts, in a workspace holding notes.txt.
func (rt *cliRuntime) run(t *testing.T, prompt string, opts mockmodel.Options, inv invocation, extra ...string) *mockRun {
	t.Helper()
	srv, err := mockmodel.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv.args = append(append(rt.mockArgs(srv), "--cwd", ws), rt.flagsOfEnv()...)
	inv.args = append(inv.args, extra...)
	inv.prompt = prompt
	inv.env = append(inv.env, rt.binEnv()+"="+rt.bin(t))
	if inv.timeout == 0 {
		inv.timeout = rt.runTimeout
	}
	if inv.timeout == 0 {
		inv.timeout = time.Minute
	}
	r := runAgentrun(t, inv)
	r.workdir = ws
	return &mockRun{srv: srv, result: r}
}

func (rt *cliRuntime) flagsOfEnv() []string {
	var f []string
	for _, e := range rt.env {
		f = append(f, "--env", e)
	}
	return f
}

// TestScenarios runs every real CLI through agentrun run, in the sandbox,
// against the mock through the proxy, for each scenario of its row, and
// checks the unified events.
func TestScenarios(t *testing.T) {
	for _, rt := range cliRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			for _, tt := range rt.scenarios {
				t.Run(tt.scenario, func(t *testing.T) {
					r := rt.run(t, "scenario:"+tt.scenario+" please", mockmodel.Options{}, invocation{})
					rt.checkScenario(t, tt, r)
				})
			}
		})
	}
}

func (rt *cliRuntime) checkScenario(t *testing.T, tt cliScenario, r *mockRun) {
	t.Helper()
	end := r.end()
	if end == nil {
		t.Fatalf("no end event; stderr:\n%s", r.stderr)
	}
	ledger := r.srv.Ledger()
	if rt.networkInTypes {
		// The proxy reports the one allowed destination, the mock, as the
		// first thing the CLI does. A model call the CLI cut and retried
		// itself (seen once on a loaded machine) adds a usage event; the
		// ledger says so.
		want := strings.Replace(tt.types, "start ", "start network ", 1)
		if mockmodel.Retried(ledger) {
			t.Logf("the CLI retried a model call; types %s", r.types())
		} else if tt.types != "" && r.types() != want {
			t.Errorf("types:\n got %s\nwant %s", r.types(), want)
		}
	} else {
		if got := r.withoutNetwork(); tt.types != "" && !slices.Contains(strings.Split(tt.types, " | "), got) {
			t.Errorf("types:\n got %s\nwant %s\nstderr:\n%s", got, tt.types, r.stderr)
		}
		checkNetwork(t, r)
	}
	agentrunExit := map[string]int{"finished": 0, "failed": 1}[tt.status]
	if end.Status != tt.status || end.ExitCode == nil || *end.ExitCode != tt.exitCode || r.exit != agentrunExit {
		t.Errorf("end %s exit_code %v, agentrun exit %d; want %s, %s's %d, %d (detail %q)", end.Status, show(end.ExitCode), r.exit, tt.status, rt.name, tt.exitCode, agentrunExit, end.Detail)
	}
	if detailOK := end.Detail == tt.detail || rt.detailPrefix && strings.HasPrefix(end.Detail, tt.detail); !detailOK {
		t.Errorf("detail %q, want %q (prefix %v)", end.Detail, tt.detail, rt.detailPrefix)
	}
	if (tt.result == "") != (end.Result == nil) || (end.Result != nil && *end.Result != tt.result) {
		t.Errorf("result %s, want %q", show(end.Result), tt.result)
	}
	if n := len(ledger); tt.calls != [2]int{} && (n < tt.calls[0] || n > tt.calls[1]) {
		t.Errorf("the mock served %d calls, want %d to %d", n, tt.calls[0], tt.calls[1])
	}
	var errs []error
	if rt.turnUsage {
		errs = mockmodel.VerifyTurnUsage(r.events, ledger)
	} else {
		errs = mockmodel.VerifyUsage(r.events, ledger, false)
	}
	for _, err := range errs {
		t.Error(err)
	}
	rt.checkCost(t, rt, r, tt.status)
	rt.checkStart(t, rt, r.result)
	checkRawReplays(t, r.result, rt.echoesPrompt)
	if tt.check != nil {
		tt.check(t, r)
	}
}

// usageModelNoCost: every usage names the --model value (the CLI's
// output names none, or the same) and has no cost: the CLI reports none.
func usageModelNoCost(t *testing.T, rt *cliRuntime, r *mockRun, _ string) {
	t.Helper()
	for _, e := range r.events {
		if u, ok := e.(*events.Usage); ok && (u.Model == nil || *u.Model != rt.model || u.CostUSD != nil) {
			t.Errorf("usage model %s cost %s, want %s and no cost", show(u.Model), show(u.CostUSD), rt.model)
		}
	}
}

// checkRunStart checks the start and prompt events of a run of mockArgs:
// the runtime and model, the sandbox and its network enforced, the names
// of the --env values first, neither a value nor the prompt shown.
func checkRunStart(t *testing.T, rt *cliRuntime, r *result) {
	t.Helper()
	start, ok := r.events[0].(*events.Start)
	if !ok {
		t.Fatalf("first event %T", r.events[0])
	}
	if start.Runtime != rt.name || start.Model == nil || *start.Model != rt.model || start.Sandbox != "bubblewrap" || !start.Network.Enforced {
		t.Errorf("start %+v", start)
	}
	retries, _, _ := strings.Cut(rt.retries, "=")
	if want := []string{rt.keyVar, rt.baseVar, retries}; len(start.Env) < 3 || !slices.Equal(start.Env[:3], want) {
		t.Errorf("start.env %v, want the names %v first", start.Env, want)
	}
	if strings.Contains(strings.Join(start.Argv, " "), "please") || strings.Contains(string(r.stdout[:200]), "test-key") {
		t.Errorf("start shows the prompt or a value: %v", start.Argv)
	}
	if p := eventstest.Find[*events.Prompt](r.events); p == nil || !strings.HasPrefix(p.Text, "scenario:") || len(p.Images) != 0 {
		t.Errorf("prompt %+v", p)
	}
}

// TestInterruptAndTimeout: every real CLI, stopped by SIGINT and by
// SIGTERM to agentrun and by --timeout while the mock's slow reply
// streams, ends interrupted (130) or timeout (124) at once; what each CLI
// leaves behind is its row's.
func TestInterruptAndTimeout(t *testing.T) {
	for _, rt := range cliRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			t.Run("SIGINT to agentrun", func(t *testing.T) {
				r := rt.run(t, "scenario:slow tell a story", mockmodel.Options{}, invocation{signal: interruptAfter(rt.interruptAfter, syscall.SIGINT)})
				end := r.end()
				if end == nil || end.Status != events.StatusInterrupted || r.exit != 130 || end.Detail != "" {
					t.Fatalf("end %+v, agentrun exit %d; want interrupted, 130", end, r.exit)
				}
				if rt.interrupted != nil {
					rt.interrupted(t, r)
				}
			})
			t.Run("SIGTERM to agentrun", func(t *testing.T) {
				r := rt.run(t, "scenario:slow tell a story", mockmodel.Options{}, invocation{signal: interruptAfter(rt.interruptAfter, syscall.SIGTERM)})
				if end := r.end(); end == nil || end.Status != events.StatusInterrupted {
					t.Fatalf("end %+v; want interrupted", end)
				}
			})
			t.Run("timeout", func(t *testing.T) {
				start := time.Now()
				r := rt.run(t, "scenario:slow tell a story", mockmodel.Options{}, invocation{}, "--timeout", fmt.Sprint(rt.timeout))
				end := r.end()
				detail := fmt.Sprintf("--timeout %d reached", rt.timeout)
				if end == nil || end.Status != events.StatusTimeout || end.Detail != detail || r.exit != 124 {
					t.Fatalf("end %+v, exit %d; want timeout with detail %s", end, r.exit, detail)
				}
				if took := time.Since(start); took > 30*time.Second {
					t.Errorf("the timeout took %s to stop the run", took)
				}
				if rt.timedOut != nil {
					rt.timedOut(t, r)
				}
			})
		})
	}
}
