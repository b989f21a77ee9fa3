//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
	"github.com/agentrun-dev/agentrun/kubectlplugin/ui/uitest"
)

// TestUI: `kubectl agentrun ui` on the cluster, as a user runs it (the
// plugin on PATH, the harness's KUBECONFIG), looked at in headless
// Chromium. A claude-code run of the mock's subagent scenario is opened
// before its Pod exists and followed live to its end: the page sees it
// Running, then its timeline has the tool calls, the subagent with its
// own tool call nested under it, and the end, finished. A second run,
// busy in a slow model call, is stopped with the page's button: it ends
// interrupted, reason Cancelled, and the page shows that end.
//
// The mock holds each of the agent's model calls a while: a quick run on
// a loaded machine can end before the kubelet reports its container
// running, and go from Pending straight to Succeeded.
func TestUI(t *testing.T) {
	t.Parallel()
	_, port := startMock(t, mockmodel.Options{ReplyDelay: 2 * time.Second})
	base, token := startUI(t)
	const name = "e2e-ui-live"
	claudeRun(name, "subagent", port).apply(t)

	ctx := uitest.Browser(t, nil)
	uitest.Do(t, ctx, "opening the ui", chromedp.Navigate(base+"/?token="+token))
	uitest.Do(t, ctx, "opening the run", chromedp.Navigate(base+"/runs/default/"+name))
	// The phases the page shows, as they come.
	uitest.Eval[bool](t, ctx, `(() => { window.__phases = [document.body.dataset.phase || '']; new MutationObserver(() => {
		const p = document.body.dataset.phase; if (p && window.__phases[window.__phases.length-1] !== p) window.__phases.push(p); })
		.observe(document.body, {attributes: true}); return true; })()`)
	waitLong(t, ctx, "the run followed to its end", 4*time.Minute,
		`!!document.querySelector('#timeline > li[data-kind="end"][data-state="finished"]') && document.body.dataset.phase === 'Succeeded'`)
	phases := uitest.Eval[[]string](t, ctx, `window.__phases`)
	t.Logf("phases the page showed: %v", phases)
	if !strings.Contains(strings.Join(phases, " "), "Running") {
		t.Errorf("the page never showed the run Running: %v", phases)
	}
	if n := uitest.Eval[int](t, ctx, `document.querySelectorAll('#timeline li[data-kind="subagent"] > ol > li[data-kind="tool"][data-state="ok"]').length`); n < 1 {
		t.Errorf("no finished tool call nested under the subagent")
	}
	if s := uitest.Eval[string](t, ctx, `(document.querySelector('#timeline li[data-kind="subagent"]')||{}).innerText || ''`); !strings.Contains(s, "general-purpose#1") || !strings.Contains(s, "Run one command") {
		t.Errorf("the subagent's item: %q", s)
	}
	if s := uitest.Eval[string](t, ctx, `document.getElementById('result').textContent`); s != "Main done after subagent" {
		t.Errorf("the result shown: %q", s)
	}
	uitest.Screenshot(t, ctx, "e2e-run")
	uitest.Clean(t, ctx)

	// The stop button.
	const busy = "e2e-ui-stop"
	workingRun(t, busy)
	uitest.Do(t, ctx, "opening the busy run", chromedp.Navigate(base+"/runs/default/"+busy))
	uitest.WaitFor(t, ctx, "the stop button", `!!document.getElementById('stop-button')`)
	uitest.Do(t, ctx, "stopping it", chromedp.Click(chromedp.ID("stop-button")), chromedp.Click(chromedp.ID("stop-yes")))
	waitLong(t, ctx, "the run ended interrupted", 2*time.Minute,
		`document.body.dataset.phase === 'Failed' && !!document.querySelector('#timeline > li[data-kind="end"][data-state="interrupted"]')`)
	run := waitEnded(t, busy, time.Minute)
	if run.Status.EndStatus != events.StatusInterrupted || succeeded(run) != "Cancelled/False" || run.Status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("the stopped run: %s %s %s", run.Status.Phase, run.Status.EndStatus, succeeded(run))
	}
	uitest.WaitFor(t, ctx, "the reason on the page", `document.getElementById('badges').textContent.includes('Cancelled')`)
	uitest.Screenshot(t, ctx, "e2e-stopped")
	uitest.Clean(t, ctx)
}

var uiAddress = regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?token=([A-Za-z0-9_-]+)`)

// startUI builds the plugin, runs `kubectl agentrun ui --no-open` in the
// default namespace and returns its address and token.
func startUI(t *testing.T) (base, token string) {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-agentrun"), "./cmd/kubectl-agentrun")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kubectl, "agentrun", "ui", "--no-open", "-n", "default")
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() }) // ended by cancel: the error is the kill's
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := uiAddress.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case m := <-found:
		return m[1], m[2]
	case <-time.After(time.Minute):
		t.Fatal("kubectl agentrun ui printed no address within a minute")
		return "", ""
	}
}

// waitLong waits for a condition in the page longer than a step's
// timeout: a run's whole life.
func waitLong(t *testing.T, ctx context.Context, what string, d time.Duration, expr string) {
	t.Helper()
	end := time.Now().Add(d)
	for !uitest.Eval[bool](t, ctx, "!!("+expr+")") {
		if time.Now().After(end) {
			body := uitest.Eval[string](t, ctx, `document.body.innerText.slice(0, 4000)`)
			t.Fatalf("%s: not so after %s\nthe page says:\n%s", what, d, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
