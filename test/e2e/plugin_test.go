//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestKubectlPlugin: `kubectl agentrun` as a user runs it. The plugin is
// built and put on PATH, where kubectl finds it, with the harness's
// KUBECONFIG. `run` creates a claude-code run against the mock (the key
// in spec.credentials from the e2e-keys Secret, the mock reachable by
// name only), follows the events sidecar's log through pods/log to the
// end and exits 0; `get` and `usage` show the run's status; `logs`
// renders the same stream again, and its jsonl is the sidecar's log byte
// for byte. Once the TTL has removed the Pod, `logs` says so.
func TestKubectlPlugin(t *testing.T) {
	t.Parallel()
	srv, port := startMock(t, mockmodel.Options{APIKey: e2eKey})
	const name = "e2e-plugin"
	const ttl = 45 * time.Second
	if _, err := kube("delete", "agentrun", name, "--ignore-not-found", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	plugin := buildPlugin(t)
	mock := mockHost + ":" + strconv.Itoa(port)

	started := time.Now()
	res := plugin(4*time.Minute, "run", "--runtime", "claude-code", "--model", "sonnet", "--name", name,
		"--timeout", "5m", "--ttl", ttl.String(), "--label", "e2e.agentrun.dev/test="+name,
		"--credential", "ANTHROPIC_API_KEY=e2e-keys/key@http://"+mock,
		"--env", "ANTHROPIC_BASE_URL=http://"+mock, "--env", "CLAUDE_CODE_MAX_RETRIES=1",
		"--add-host", mockHost+"="+nodeIP, "--allow-host", mock, "--allow-host", nodeIP+":"+strconv.Itoa(port),
		"Please run the demo. scenario:parallel")
	t.Logf("kubectl agentrun run: exit %d after %s\nstderr:\n%s", res.code, time.Since(started).Round(100*time.Millisecond), res.stderr)
	if res.code != 0 || !strings.Contains(res.stderr, "agentrun.agentrun.dev/"+name+" created") {
		t.Fatalf("kubectl agentrun run: exit %d\nstdout:\n%s", res.code, res.stdout)
	}
	// Followed to the end: the stream rendered as text, up to the end line.
	lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "[main] prompt Please run the demo.") || !strings.HasPrefix(lines[len(lines)-1], "[end] finished ") ||
		!strings.Contains(res.stdout, "Both commands finished.") {
		t.Errorf("the rendered stream:\n%s", res.stdout)
	}

	// The exit code was the status's outcome; the key reached the mock.
	run := getRun(t, name)
	st := run.Status
	if st.Phase != "Succeeded" || st.Result == nil || *st.Result != parallelResult || st.Usage == nil || st.Usage.TotalTokens == nil {
		t.Fatalf("status %+v", st)
	}
	for _, c := range srv.Ledger() {
		if c.Key != "ok" {
			t.Errorf("a call reached the mock without the key: %+v", c)
		}
	}
	if len(run.Spec.Credentials) != 1 || run.Spec.Network.Mode != v1alpha1.NetworkCustom || run.Labels["e2e.agentrun.dev/test"] != name {
		t.Errorf("the run the plugin made: %+v %+v", run.Labels, run.Spec)
	}

	// logs renders the same stream as run did; jsonl is the sidecar's log.
	if again := plugin(time.Minute, "logs", name); again.code != 0 || again.stdout != res.stdout || again.stderr != "" {
		t.Errorf("kubectl agentrun logs: exit %d, stderr %q\n%s", again.code, again.stderr, again.stdout)
	}
	sidecar, err := kube("logs", st.PodName, "-c", "events")
	if err != nil {
		t.Fatal(err)
	}
	if jsonl := plugin(time.Minute, "logs", "-f", name, "--format", "jsonl"); jsonl.code != 0 || jsonl.stdout != sidecar {
		t.Errorf("kubectl agentrun logs --format jsonl: exit %d, stderr %q, differs from the events container's log", jsonl.code, jsonl.stderr)
	}

	// get: the wide row of the run.
	get := plugin(time.Minute, "get", name)
	rows := strings.Split(strings.TrimRight(get.stdout, "\n"), "\n")
	cost, err := strconv.ParseFloat(st.Usage.CostUSD, 64)
	if err != nil {
		t.Fatalf("status cost %q: %v", st.Usage.CostUSD, err)
	}
	want := []string{name, "Succeeded", "Finished", text.FormatTokens(*st.Usage.TotalTokens), text.FormatCost(cost)}
	if get.code != 0 || len(rows) != 2 || !strings.HasPrefix(rows[0], "NAME ") ||
		strings.Join(strings.Fields(rows[1])[:5], " ") != strings.Join(want, " ") || !strings.HasSuffix(rows[1], "   Both commands finished.") {
		t.Errorf("kubectl agentrun get: exit %d, stderr %q, want %v ... Both commands finished.\n%s", get.code, get.stderr, want, get.stdout)
	}

	// usage: the run's tokens and cost, by model, and the total.
	usage := plugin(time.Minute, "usage", "-l", "e2e.agentrun.dev/test="+name, "--since", "1h")
	u := st.Usage
	total := fmt.Sprintf("TOTAL 1 %d %d %d %d %d %s", *u.InputTokens, *u.OutputTokens, *u.CacheReadTokens, *u.CacheWriteTokens,
		*u.TotalTokens, text.FormatCost(cost))
	var header, totalRow string
	for _, l := range strings.Split(usage.stdout, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if header == "" {
			header = l
		}
		if strings.HasPrefix(l, "TOTAL ") {
			totalRow = l
		}
	}
	if usage.code != 0 || !strings.HasPrefix(header, "MODEL RUNS INPUT") || totalRow != total {
		t.Errorf("kubectl agentrun usage: exit %d, stderr %q, want the row %q\n%s", usage.code, usage.stderr, total, usage.stdout)
	}
	for model := range u.ByModel {
		if !strings.Contains(usage.stdout, model+" ") {
			t.Errorf("usage has no row for the model %s:\n%s", model, usage.stdout)
		}
	}

	if missing := plugin(time.Minute, "logs", "e2e-plugin-nope"); missing.code != 1 ||
		!strings.Contains(missing.stderr, `agentrun "e2e-plugin-nope" not found`) {
		t.Errorf("logs of a missing run: exit %d, stderr %q", missing.code, missing.stderr)
	}

	// Once the TTL removed the Pod, logs says where the outcome is.
	if !eventually(2*time.Minute+ttl, func() bool {
		out, _ := kube("get", "pod", st.PodName, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == ""
	}) {
		t.Fatalf("the Pod %s is still there after the TTL", st.PodName)
	}
	gone := plugin(time.Minute, "logs", "-f", name)
	if gone.code != 1 || !strings.Contains(gone.stderr, "the Pod "+st.PodName+" of agentrun "+name+" is gone") ||
		!strings.Contains(gone.stderr, "spec.retention.jobTTLAfterEnd (45s)") || !strings.Contains(gone.stderr, "Succeeded (Finished)") {
		t.Errorf("logs after the TTL: exit %d, stderr %q", gone.code, gone.stderr)
	}
}

// pluginResult is what one `kubectl agentrun` command line did.
type pluginResult struct {
	code           int
	stdout, stderr string
}

// buildPlugin builds cmd/kubectl-agentrun into a directory of its own and
// returns a runner of `kubectl agentrun ...`: the harness's kubectl, with
// that directory first on PATH and KUBECONFIG set, as a user who copied
// the binary onto PATH has it.
func buildPlugin(t *testing.T) func(timeout time.Duration, args ...string) pluginResult {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-agentrun"), "./cmd/kubectl-agentrun")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	return func(timeout time.Duration, args ...string) pluginResult {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"agentrun"}, args...)...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		code := 0
		switch {
		case ctx.Err() != nil:
			t.Fatalf("kubectl agentrun %s: no exit within %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, out.String(), errOut.String())
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatalf("kubectl agentrun %s: %v", strings.Join(args, " "), err)
		}
		return pluginResult{code, out.String(), errOut.String()}
	}
}
