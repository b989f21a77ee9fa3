// Package uitest drives a real browser for the tests of kubectl agentrun
// ui: Debian's Chromium (packages chromium and chromium-driver, installed
// by hack/setup.sh), headless, through chromedp, with a fresh profile for
// each test. Every page it opens records the Content-Security-Policy
// violations and script errors it meets, so that a test can say none
// happened, and screenshots go to an ignored directory for a reviewer.
package uitest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Width and Height are the window's size: a laptop's screen.
const (
	Width  = 1440
	Height = 900
)

// watch is run in every document before its own scripts: it records
// what the page itself cannot hide.
const watch = `(() => {
  window.__uitest = { csp: [], errors: [] };
  document.addEventListener('securitypolicyviolation', (e) =>
    window.__uitest.csp.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sourceFile || '') + ':' + e.lineNumber));
  window.addEventListener('error', (e) => window.__uitest.errors.push(String(e.message)));
})();`

// Browser starts a headless Chromium for the test and returns its tab's
// context; extra flags are added to the fixed set (a host resolver rule,
// say). The browser ends with the test.
func Browser(t testing.TB, extra map[string]any) context.Context {
	t.Helper()
	path := os.Getenv("AGENTRUN_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Fatalf("no Chromium at %s: these tests need a real browser; run `make setup` (hack/setup.sh installs Debian's chromium and chromium-driver), or set AGENTRUN_CHROMIUM", path)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(Width, Height),
	}
	for k, v := range extra {
		opts = append(opts, chromedp.Flag(k, v))
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(Width, Height)); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watch}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// Timeout bounds one step of a test in the browser.
const Timeout = 30 * time.Second

// Do runs actions with the step's timeout, failing the test with what
// was being done.
func Do(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// WaitFor waits until a JavaScript expression is true in the page; on
// timeout it fails with the page's text.
func WaitFor(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	// A navigation under way ends a poll with an error: poll again in the
	// new page until the time is up.
	for {
		_, err := chromedp.Run(c, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return
		}
		if c.Err() != nil {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ''`))
			t.Fatalf("%s: %v (waited for %s)\nthe page says:\n%s", what, err, expr, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unlabelled lists the page's controls a screen reader could not name:
// form fields without a label, buttons and links without text, canvases
// without a text alternative.
const unlabelled = `[...document.querySelectorAll('input, select, textarea, button, a[href], canvas')].filter(e => {
  if (e.closest('[hidden]')) return false;
  if (e.matches('input, select, textarea')) return !(e.labels && e.labels.length) && !e.getAttribute('aria-label');
  if (e.matches('canvas')) return !e.getAttribute('aria-label');
  return !(e.textContent.trim() || e.getAttribute('aria-label'));
}).map(e => e.outerHTML.slice(0, 120))`

// Clean fails the test if the page met a CSP violation or a script
// error, or has a control a screen reader cannot name.
func Clean(t testing.TB, ctx context.Context) {
	t.Helper()
	for _, e := range Eval[[]string](t, ctx, unlabelled) {
		t.Errorf("a control without a label or text: %s", e)
	}
	var got struct {
		CSP    []string `json:"csp"`
		Errors []string `json:"errors"`
	}
	raw := Eval[[]byte](t, ctx, `window.__uitest || {csp: [], errors: []}`)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, v := range got.CSP {
		t.Errorf("Content-Security-Policy violation: %s", v)
	}
	for _, e := range got.Errors {
		t.Errorf("script error: %s", e)
	}
}

// Screenshot writes the whole page as PNG to the artifacts directory
// (artifacts/ui in the repository, ignored by git; AGENTRUN_UI_SHOTS
// moves it) and returns its path. With AGENTRUN_UI_DOCS=1 the picture
// goes to docs/ui too, for docs/ui.md.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	buf, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("AGENTRUN_UI_SHOTS")
	if dir == "" {
		dir = filepath.Join(repoRoot(), "artifacts", "ui")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("AGENTRUN_UI_DOCS") == "1" {
		docs := filepath.Join(repoRoot(), "docs", "ui")
		if err := os.MkdirAll(docs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(docs, name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %s", path)
	return path
}

// repoRoot is the repository's top directory, from this file's place.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
