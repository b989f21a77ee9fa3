// Package cli tests the built agentrun binary end to end: the real agent
// CLIs (installed by hack/setup.sh; one cliRuntime row each, see
// runtimes_test.go) against the project's mock model on 127.0.0.1, and
// hand-written fake CLIs for bad input.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

var (
	agentrun string // the built binary
	repoRoot string
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	dir, err := os.MkdirTemp("", "agentrun-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentrun = filepath.Join(dir, "agentrun")
	build := exec.Command("go", "build", "-o", agentrun, "./cmd/agentrun")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building agentrun:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// claudeBin is the real claude-code CLI.
func claudeBin(t *testing.T) string { return claudeCodeCLI.bin(t) }

// cliBin is a real CLI: the path in env, else the cache that hack/setup.sh
// fills (AGENTRUN_CLI_CACHE names another, as for hack/install-clis.sh:
// make test-clis-latest's). Missing is a failure, not a skip.
func cliBin(t *testing.T, runtime, env, bin string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		cache := os.Getenv("AGENTRUN_CLI_CACHE")
		if cache == "" {
			cache = filepath.Join(repoRoot, ".cache", "clis")
		}
		p = filepath.Join(cache, runtime, "node_modules", ".bin", bin)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the real %s CLI is missing (%v): run hack/setup.sh", runtime, err)
	}
	return p
}

// result is one finished agentrun invocation.
type result struct {
	stdout, stderr []byte
	events         []events.Event
	raw            []byte // the --raw file
	exit           int
	workdir        string
	home           string // agentrun's HOME
}

func (r *result) end() *events.End {
	if len(r.events) == 0 {
		return nil
	}
	e, _ := r.events[len(r.events)-1].(*events.End)
	return e
}

func (r *result) types() string {
	var s []string
	for _, e := range r.events {
		s = append(s, events.Head(e).Type)
	}
	return strings.Join(s, " ")
}

// invocation describes one agentrun run.
type invocation struct {
	args    []string // agentrun run flags (before the prompt)
	prompt  string
	env     []string // extra environment for agentrun itself
	signal  func(p *os.Process)
	timeout time.Duration
}

// runAgentrun runs `agentrun run --raw FILE ARGS PROMPT` and decodes its stdout.
func runAgentrun(t *testing.T, inv invocation) *result {
	t.Helper()
	work := t.TempDir()
	rawPath := filepath.Join(work, "raw.jsonl")
	args := append([]string{"run", "--raw", rawPath}, inv.args...)
	if inv.prompt != "" {
		args = append(args, inv.prompt)
	}
	if inv.timeout == 0 {
		inv.timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), inv.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentrun, args...)
	// A home of its own: the sandbox's default deny list lives there, and
	// placeholders for missing entries would otherwise land in the real one.
	home := t.TempDir()
	cmd.Env = append(append(os.Environ(), "HOME="+home), inv.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if inv.signal != nil {
		go inv.signal(cmd.Process)
	}
	err := cmd.Wait()
	r := &result{stdout: stdout.Bytes(), stderr: stderr.Bytes(), workdir: work, home: home}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentrun: %v\nstderr: %s", err, stderr.Bytes())
	}
	r.raw, _ = os.ReadFile(rawPath)
	rd := events.NewReader(bytes.NewReader(r.stdout))
	for {
		e, err := rd.Next()
		if err != nil {
			break
		}
		r.events = append(r.events, e)
	}
	// Every event against the JSON Schema, and the stream rules.
	for _, err := range eventstest.Check(r.stdout) {
		t.Errorf("stream contract: %v", err)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	return r
}

// mockRun is a real claude-code run through agentrun against a fresh mock.
type mockRun struct {
	srv *mockmodel.Server
	*result
}

// mockHost is the name the sandbox's proxy routes to the mock.
const mockHost = "mock-model.test"

// claudeArgs points claude-code at the mock: in the sandbox (the default)
// through the filter proxy (cliRuntime.mockArgs). Without one (sandboxed
// false) the CLI talks to 127.0.0.1 directly.
func claudeArgs(t *testing.T, srv *mockmodel.Server, sandboxed bool) []string {
	if sandboxed {
		return claudeCodeCLI.mockArgs(srv)
	}
	return []string{"--runtime", "claude-code", "--model", "sonnet",
		"--env", "ANTHROPIC_API_KEY=test-key", "--env", "CLAUDE_CODE_MAX_RETRIES=1",
		"--sandbox", "none", "--env", "ANTHROPIC_BASE_URL=" + srv.URL()}
}

// runScenario is a real claude-code run of the mock's scenario in the
// sandbox.
func runScenario(t *testing.T, scenario string, opts mockmodel.Options, extra ...string) *mockRun {
	t.Helper()
	return claudeCodeCLI.run(t, "scenario:"+scenario+" please", opts, invocation{}, extra...)
}

// runScenarioUnsandboxed is runScenario with --sandbox none.
func runScenarioUnsandboxed(t *testing.T, scenario string, opts mockmodel.Options, extra ...string) *mockRun {
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
	args := append(claudeArgs(t, srv, false), "--cwd", ws)
	args = append(args, extra...)
	r := runAgentrun(t, invocation{args: args, prompt: "scenario:" + scenario + " please",
		env: []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t)}})
	r.workdir = ws
	return &mockRun{srv: srv, result: r}
}

// lastResultCost is total_cost_usd of the last result line in the raw output.
func lastResultCost(raw []byte) *float64 {
	var cost *float64
	for _, line := range bytes.Split(raw, []byte("\n")) {
		var l struct {
			Type         string   `json:"type"`
			TotalCostUSD *float64 `json:"total_cost_usd"`
		}
		if json.Unmarshal(line, &l) == nil && l.Type == "result" {
			cost = l.TotalCostUSD
		}
	}
	return cost
}

func interruptAfter(d time.Duration, sig syscall.Signal) func(p *os.Process) {
	return func(p *os.Process) {
		time.Sleep(d)
		_ = p.Signal(sig)
	}
}

// checkRawReplays: --raw holds the CLI's stdout, and `agentrun translate`
// of it (with the run's --model and exit code) gives the live run's events
// and usage, less the proxy's network events and, for a runtime that does
// not echo the prompt, the prompt event agentrun wrote itself.
func checkRawReplays(t *testing.T, r *result, echoesPrompt bool) {
	t.Helper()
	if len(r.raw) == 0 || r.raw[len(r.raw)-1] != '\n' {
		t.Fatalf("--raw is empty or cut: %d bytes", len(r.raw))
	}
	start, end := r.events[0].(*events.Start), r.end()
	args := []string{"translate", "--runtime", start.Runtime}
	if start.Model != nil {
		args = append(args, "--model", *start.Model)
	}
	if end.ExitCode != nil {
		args = append(args, "--exit-code", strconv.Itoa(*end.ExitCode))
	}
	cmd := exec.Command(agentrun, args...)
	cmd.Stdin = bytes.NewReader(r.raw)
	out, _ := cmd.Output()
	for _, err := range eventstest.Check(out) {
		t.Errorf("translate of --raw, stream contract: %v", err)
	}
	var replay result
	replay.stdout = out
	rd := events.NewReader(bytes.NewReader(out))
	for {
		e, err := rd.Next()
		if err != nil {
			break
		}
		replay.events = append(replay.events, e)
	}
	live := r.withoutNetwork()
	if !echoesPrompt {
		live = strings.Replace(live, " prompt", "", 1)
	}
	if replay.types() != live {
		t.Errorf("translate of --raw gives\n%s\nthe live run gave\n%s", replay.types(), live)
	}
	re := replay.end()
	if re == nil || re.Status != end.Status {
		t.Fatalf("translate end %+v, live %s", re, end.Status)
	}
	if a, b := show(re.Usage), show(end.Usage); a != b {
		t.Errorf("translate end.usage %s, live %s", a, b)
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// withoutNetwork is the event types less the proxy's network events, whose
// place depends on timing; checkNetwork checks them.
func (r *result) withoutNetwork() string { return strings.ReplaceAll(r.types(), " network", "") }

// checkNetwork: the CLI reached the mock through the proxy, and nothing
// else.
func checkNetwork(t *testing.T, r *mockRun) {
	t.Helper()
	u, _ := url.Parse(r.srv.URL())
	var seen []string
	for _, e := range r.events {
		if n, ok := e.(*events.NetworkAccess); ok {
			seen = append(seen, fmt.Sprintf("%s:%d %v", n.Host, n.Port, n.Allowed))
		}
	}
	if want := mockHost + ":" + u.Port() + " true"; len(seen) != 1 || seen[0] != want {
		t.Errorf("network events %q, want only %q", seen, want)
	}
}
