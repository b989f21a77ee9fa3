// Package cli tests the built agentrun binary end to end: the real
// claude-code CLI (installed by hack/setup.sh) against the project's mock
// model on 127.0.0.1, and hand-written fake CLIs for bad input.
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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/eventstest"
	"github.com/agentrun-dev/agentrun/mockmodel"
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

// claudeBin is the real CLI: AGENTRUN_CLAUDE_BIN, else the cache that
// hack/setup.sh fills. Missing is a failure, not a skip.
func claudeBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("AGENTRUN_CLAUDE_BIN")
	if p == "" {
		p = filepath.Join(repoRoot, ".cache", "clis", "claude-code", "node_modules", ".bin", "claude")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the real claude-code CLI is missing (%v): run hack/setup.sh", err)
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
	cmd.Env = append(os.Environ(), inv.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if inv.signal != nil {
		go inv.signal(cmd.Process)
	}
	err := cmd.Wait()
	r := &result{stdout: stdout.Bytes(), stderr: stderr.Bytes(), workdir: work}
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

// claudeArgs points claude-code at the mock. In the sandbox (the default)
// the mock is reachable only through the filter proxy: a test host name
// routed to it with --add-host and allowed explicitly, as in production an
// in-cluster model gateway would be. Without one (sandboxed false) the CLI
// talks to 127.0.0.1 directly.
func claudeArgs(t *testing.T, srv *mockmodel.Server, sandboxed bool) []string {
	u, _ := url.Parse(srv.URL())
	args := []string{"--runtime", "claude-code", "--model", "sonnet",
		"--env", "ANTHROPIC_API_KEY=test-key", "--env", "CLAUDE_CODE_MAX_RETRIES=1"}
	if !sandboxed {
		return append(args, "--sandbox", "none", "--env", "ANTHROPIC_BASE_URL="+srv.URL())
	}
	return append(args, "--env", "ANTHROPIC_BASE_URL=http://"+mockHost+":"+u.Port(),
		"--add-host", mockHost+"=127.0.0.1", "--allow-host", mockHost+":"+u.Port(), "--allow-host", "127.0.0.1:"+u.Port())
}

func runScenario(t *testing.T, scenario string, opts mockmodel.Options, extra ...string) *mockRun {
	t.Helper()
	return runScenarioIn(t, scenario, opts, true, extra...)
}

func runScenarioIn(t *testing.T, scenario string, opts mockmodel.Options, sandboxed bool, extra ...string) *mockRun {
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
	args := append(claudeArgs(t, srv, sandboxed), "--cwd", ws)
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
