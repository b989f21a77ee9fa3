package kubectlplugin

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/kubectlplugin/ui/uitest"
)

// The ui's tests run `kubectl agentrun ui` from its command line against
// envtest's API server, as the other verbs' tests do (the tests write the
// runs' status and serve the Pods' logs from fakeLogs), and look at its
// pages in a real browser: Debian's Chromium, headless.

// uiServer is a running `kubectl agentrun ui`.
type uiServer struct {
	url   string // with the token
	base  string // http://127.0.0.1:PORT
	token string
	stop  func()
}

var uiURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]+`)

// startUI starts the ui on a free port with the cluster's kubeconfig
// (or the given one) and waits for its URL.
func (cl *cluster) startUI(args ...string) *uiServer {
	cl.t.Helper()
	ctx, cancel := context.WithCancel(cl.ctx)
	base := []string{"ui", "--no-open", "--port", "0"}
	if !slices.Contains(args, "-A") {
		base = append(base, "-n", cl.ns)
	}
	b := cl.startCtx(ctx, append(base, args...)...)
	var found string
	waitFor(cl.t, "the ui's URL on stdout", func() bool {
		select {
		case r := <-b.done:
			cl.t.Fatalf("kubectl agentrun ui exited %d: %s", r.code, r.stderr)
		default:
		}
		found = uiURL.FindString(b.stdout.String())
		return found != ""
	})
	u, _ := url.Parse(found)
	s := &uiServer{url: found, base: "http://" + u.Host, token: u.Query().Get("token")}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if r := b.wait(cl.t); r.code != 0 {
				cl.t.Errorf("kubectl agentrun ui exited %d: %s", r.code, r.stderr)
			}
		})
	}
	cl.t.Cleanup(s.stop)
	return s
}

// open opens a page of the ui in a new browser, through the URL with the
// token (which sets the cookie) and then the page's path.
func (s *uiServer) open(t testing.TB, path string) context.Context {
	t.Helper()
	ctx := uitest.Browser(t, nil)
	uitest.Do(t, ctx, "opening the ui", chromedp.Navigate(s.url))
	if path != "/" {
		uitest.Do(t, ctx, "opening "+path, chromedp.Navigate(s.base+path))
	}
	return ctx
}

// runAt creates a run with a creation time in the past order (names sort
// as they were made) and its status.
func (cl *cluster) runIn(ns, name string, labels map[string]string, spec v1alpha1.AgentRunSpec, st v1alpha1.AgentRunStatus) *v1alpha1.AgentRun {
	cl.t.Helper()
	if spec.Prompt.Text == nil {
		spec.Prompt.Text = strp("Please run the demo.")
	}
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: spec}
	if err := cl.c.Create(cl.ctx, run); err != nil {
		cl.t.Fatal(err)
	}
	if st.Phase != "" {
		cl.setStatus(run, st)
	}
	return run
}

// phaseStatus is the status the controller writes for a phase, with a
// Succeeded reason, usage and times.
func phaseStatus(phase v1alpha1.Phase, reason string, tokens int64, cost string) v1alpha1.AgentRunStatus {
	st := v1alpha1.AgentRunStatus{Phase: phase, Conditions: succeededCondition(phase, reason)}
	start := time.Now().Add(-10 * time.Minute)
	if phase == v1alpha1.PhaseRunning || phase == v1alpha1.PhaseSucceeded || phase == v1alpha1.PhaseFailed {
		st.StartTime = mtime(start)
	}
	if tokens > 0 {
		st.Usage = &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: i64(tokens / 2), OutputTokens: i64(tokens / 4),
			CacheReadTokens: i64(tokens / 4), CacheWriteTokens: i64(0), CostUSD: cost},
			TotalTokens: i64(tokens - tokens/2 - tokens/4 - tokens/4 + tokens/2 + tokens/4 + tokens/4)}
		st.Usage.ByModel = map[string]v1alpha1.TokenCounts{"claude-sonnet-4-5": st.Usage.TokenCounts}
	}
	switch phase {
	case v1alpha1.PhaseSucceeded:
		st.EndStatus, st.CompletionTime, st.DurationMs = events.StatusFinished, mtime(start.Add(3*time.Minute)), i64(180_000)
		st.Result = strp("All tests pass.\nDetails follow.")
	case v1alpha1.PhaseFailed:
		st.EndStatus, st.CompletionTime, st.DurationMs = events.StatusInterrupted, mtime(start.Add(time.Minute)), i64(61_500)
		st.Detail = "cancelled (spec.stop): the agent was stopped"
	case v1alpha1.PhaseRunning:
		st.Progress = &v1alpha1.Progress{ModelCalls: 3, ToolCalls: 2, Activity: "[main] tool Bash: go test ./..."}
	}
	return st
}

// TestUIRunsList: the list with runs in every phase, its filters (phase,
// runtime, labels, namespace with -A), its sort, and live updates from
// the watch: a status that changes, a run made and one deleted.
func TestUIRunsList(t *testing.T) {
	cl := newCluster(t)
	other := newCluster(t) // a second namespace, for -A
	claude, codex, pi := v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Model: "sonnet"},
		v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeCodex, Model: "gpt-5"}, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimePi}
	team := map[string]string{"team": "a"}
	cl.runIn(cl.ns, "a-new", nil, pi, v1alpha1.AgentRunStatus{})
	cl.runIn(cl.ns, "b-pending", team, claude, phaseStatus(v1alpha1.PhasePending, "Pending", 0, ""))
	queued := phaseStatus(v1alpha1.PhaseQueued, "BudgetExhausted", 0, "")
	cl.runIn(cl.ns, "c-queued", team, codex, queued)
	running := cl.runIn(cl.ns, "d-running", team, claude, phaseStatus(v1alpha1.PhaseRunning, "Running", 12_000, "0.0210"))
	cl.runIn(cl.ns, "e-succeeded", nil, claude, phaseStatus(v1alpha1.PhaseSucceeded, "Finished", 250_000, "0.4370"))
	cl.runIn(cl.ns, "f-failed", team, codex, phaseStatus(v1alpha1.PhaseFailed, "Cancelled", 40_000, ""))
	other.runIn(other.ns, "g-elsewhere", nil, pi, phaseStatus(v1alpha1.PhaseSucceeded, "Finished", 900, "0.0009"))

	ui := cl.startUI("-A")
	ctx := ui.open(t, "/")
	rows := func(want int) {
		t.Helper()
		uitest.WaitFor(t, ctx, "the list's rows", `document.querySelectorAll('#runs-body tr').length === `+itoa(want))
	}
	// -A lists both namespaces (and whatever other tests left there:
	// count this test's own).
	mine := `[...document.querySelectorAll('#runs-body tr')].filter(r => r.dataset.key.startsWith('` + cl.ns + `/') || r.dataset.key.startsWith('` + other.ns + `/')).length`
	uitest.WaitFor(t, ctx, "every run of both namespaces", mine+` === 7`)
	for _, c := range []struct{ name, phase string }{{"a-new", "New"}, {"b-pending", "Pending"}, {"c-queued", "Queued"},
		{"d-running", "Running"}, {"e-succeeded", "Succeeded"}, {"f-failed", "Failed"}} {
		uitest.WaitFor(t, ctx, c.name+" shows "+c.phase, `!!document.querySelector('tr[data-key="`+cl.ns+`/`+c.name+`"][data-phase="`+c.phase+`"]')`)
	}
	row := func(name string) string {
		return uitest.Eval[string](t, ctx, `(document.querySelector('tr[data-key="`+cl.ns+`/`+name+`"]')||{}).innerText || ''`)
	}
	if r := row("f-failed"); !strings.Contains(r, "Failed · Cancelled") || !strings.Contains(r, "interrupted") || !strings.Contains(r, "1m01s") ||
		!strings.Contains(r, "40.0k") || !strings.Contains(r, "codex") {
		t.Errorf("the failed run's row: %q", r)
	}
	if r := row("e-succeeded"); !strings.Contains(r, "$0.4370") || !strings.Contains(r, "250.0k") || !strings.Contains(r, "All tests pass.") || !strings.Contains(r, "3m00s") {
		t.Errorf("the succeeded run's row: %q", r)
	}
	if r := row("c-queued"); !strings.Contains(r, "Queued · BudgetExhausted") {
		t.Errorf("the queued run's row: %q", r)
	}
	uitest.Screenshot(t, ctx, "runs")
	uitest.Clean(t, ctx)

	// Sort by tokens, most first: the succeeded run leads this namespace.
	uitest.Do(t, ctx, "sorting by tokens", chromedp.Click(chromedp.CSS(`button.sort[data-key="tokens"]`)))
	uitest.WaitFor(t, ctx, "sorted by tokens", `document.querySelector('th[aria-sort="descending"] button[data-key="tokens"]') !== null`)
	first := uitest.Eval[string](t, ctx, `[...document.querySelectorAll('#runs-body tr')].map(r => r.dataset.key).filter(k => k.startsWith('`+cl.ns+`/'))[0]`)
	if first != cl.ns+"/e-succeeded" {
		t.Errorf("sorted by tokens, the first run is %s", first)
	}

	// By keyboard: Tab to the Name column's button, Enter sorts by name.
	uitest.Do(t, ctx, "sorting by name with the keyboard", chromedp.Focus(chromedp.CSS(`button.sort[data-key="runtime"]`)),
		chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)), chromedp.KeyEvent(kb.Enter))
	uitest.WaitFor(t, ctx, "sorted by name", `document.querySelector('th[aria-sort="ascending"] button[data-key="name"]') !== null && document.activeElement.dataset.key === 'name'`)

	// Live: the running run ends; a new run comes; one is deleted.
	st := phaseStatus(v1alpha1.PhaseSucceeded, "Finished", 15_000, "0.0300")
	cl.setStatus(running, st)
	uitest.WaitFor(t, ctx, "the running run shown Succeeded", `!!document.querySelector('tr[data-key="`+cl.ns+`/d-running"][data-phase="Succeeded"]')`)
	cl.runIn(cl.ns, "h-later", nil, claude, phaseStatus(v1alpha1.PhaseRunning, "Running", 10, ""))
	uitest.WaitFor(t, ctx, "the new run listed", `!!document.querySelector('tr[data-key="`+cl.ns+`/h-later"][data-phase="Running"]')`)
	if err := cl.c.Delete(cl.ctx, &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "a-new"}}); err != nil {
		t.Fatal(err)
	}
	uitest.WaitFor(t, ctx, "the deleted run gone", `!document.querySelector('tr[data-key="`+cl.ns+`/a-new"]')`)

	// Filters: the form reloads the page with its query.
	uitest.Do(t, ctx, "filtering by namespace and phase",
		chromedp.SetValue(chromedp.ID("f-ns"), cl.ns), chromedp.SetValue(chromedp.ID("f-phase"), "Succeeded"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	uitest.WaitFor(t, ctx, "the query in the URL", `location.search.includes('phase=Succeeded')`)
	rows(2) // e-succeeded and d-running, now Succeeded
	uitest.Do(t, ctx, "filtering by runtime and label",
		chromedp.Navigate(ui.base+"/?ns="+cl.ns+"&runtime=codex&l="+url.QueryEscape("team=a")))
	uitest.WaitFor(t, ctx, "codex runs of team a", `[...document.querySelectorAll('#runs-body tr')].map(r => r.dataset.key).sort().join(',') === '`+
		cl.ns+`/c-queued,`+cl.ns+`/f-failed'`)
	if v := uitest.Eval[string](t, ctx, `document.getElementById('f-runtime').value + ' ' + document.getElementById('f-label').value`); v != "codex team=a" {
		t.Errorf("the filter form shows %q", v)
	}
	uitest.Do(t, ctx, "filtering by a label no run has", chromedp.Navigate(ui.base+"/?ns="+cl.ns+"&l="+url.QueryEscape("team=zzz")))
	uitest.WaitFor(t, ctx, "the empty list says so", `!document.getElementById('empty').hidden`)
	uitest.Clean(t, ctx)
}

func itoa(n int) string { return strconv.Itoa(n) }

// timelineStream is a claude-code run's event log with everything the
// timeline shows: the prompt, text, tool calls (one failed), a subagent
// with its own tool call, an allowed and a denied connection, and the end.
func timelineStream(t *testing.T, end bool) []byte {
	t.Helper()
	var b bytes.Buffer
	w := events.NewWriter(&b)
	at := time.Date(2026, 10, 4, 13, 0, 0, 0, time.UTC)
	n := 0
	put := func(typ string, e events.Event) {
		n++
		events.Stamp(e, typ, at.Add(time.Duration(n)*700*time.Millisecond))
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	main := (*string)(nil)
	sub := events.String("toolu_sub")
	put(events.TypeStart, &events.Start{Runtime: "claude-code", Sandbox: "bubblewrap", Network: events.Network{Mode: "custom", Allow: []string{"api.anthropic.com"}, Enforced: true},
		DenyRead: []string{}, Model: events.String("sonnet"), Cwd: "/workspace", Argv: []string{"claude"}, Env: []string{}})
	put(events.TypePrompt, &events.Prompt{Text: "Add tests for the parse module and fix what fails", Images: []string{}})
	put(events.TypeNetwork, &events.NetworkAccess{Host: "api.anthropic.com", Port: 443, Allowed: true})
	put(events.TypeText, &events.Text{Parent: main, Text: "I will look at the callers first."})
	put(events.TypeSubagentStart, &events.SubagentStart{ID: *sub, Parent: main, Number: 1, Kind: "Explore", Model: events.String("haiku"), Description: "Find every caller of parse_line"})
	put(events.TypeToolStart, &events.ToolStart{ID: "toolu_grep", Parent: sub, Name: "Grep", Summary: "Grep: parse_line"})
	put(events.TypeTool, &events.Tool{ID: "toolu_grep", Parent: sub, Name: "Grep", Summary: "Grep: parse_line", Error: events.Bool(false)})
	put(events.TypeUsage, &events.Usage{Parent: sub, Model: events.String("claude-haiku-4-5"), InputTokens: events.Int64(3120), OutputTokens: events.Int64(85),
		CacheReadTokens: events.Int64(9800), CacheWriteTokens: events.Int64(1200)})
	put(events.TypeSubagentEnd, &events.SubagentEnd{ID: *sub, Status: events.SubagentFinished, DurationMs: 12410, Usage: events.NewTotals()})
	put(events.TypeToolStart, &events.ToolStart{ID: "toolu_test", Parent: main, Name: "Bash", Summary: "Bash: go test ./parse/..."})
	put(events.TypeTool, &events.Tool{ID: "toolu_test", Parent: main, Name: "Bash", Summary: "Bash: go test ./parse/...", Error: events.Bool(true)})
	put(events.TypeNetwork, &events.NetworkAccess{Host: "evil.example", Port: 443, Allowed: false, Reason: events.String(events.ReasonNotAllowed)})
	put(events.TypeToolStart, &events.ToolStart{ID: "toolu_fix", Parent: main, Name: "Edit", Summary: "Edit: parse/parse.go"})
	if !end {
		return b.Bytes()
	}
	put(events.TypeTool, &events.Tool{ID: "toolu_fix", Parent: main, Name: "Edit", Summary: "Edit: parse/parse.go", Error: events.Bool(false)})
	put(events.TypeText, &events.Text{Parent: main, Text: "All tests pass."})
	totals := events.NewTotals()
	totals.AddModel("claude-sonnet-4-5", events.TokenCounts{InputTokens: events.Int64(20), OutputTokens: events.Int64(247), CacheReadTokens: events.Int64(32200),
		CacheWriteTokens: events.Int64(2700), CostUSD: events.Float64(0.0301)})
	put(events.TypeEnd, &events.End{Status: events.StatusFinished, ExitCode: events.Int(0), DurationMs: 31250, Usage: totals, Result: events.String("All tests pass.")})
	return b.Bytes()
}

// TestUIRun: one run's page, followed live from its Pod's events
// container until its end: the timeline's prompt, text, tool calls (the
// failed one marked), the subagent with its tool call nested under it,
// the denied connection highlighted, the end; the status in words, the
// usage by model, the result, the kubectl commands.
func TestUIRun(t *testing.T) {
	cl := newCluster(t)
	spec := v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Model: "sonnet", Limits: &v1alpha1.Limits{MaxTokens: i64(500_000)}}
	st := phaseStatus(v1alpha1.PhaseRunning, "Running", 12_000, "0.0210")
	st.PodName, st.JobName = "live-pod", "live"
	run := cl.runIn(cl.ns, "live", map[string]string{"team": "a"}, spec, st)
	cl.logs.set("live-pod", fakeLog{data: timelineStream(t, false)})
	pod := cl.pod(run, "live-pod", runningState)

	ui := cl.startUI()
	ctx := ui.open(t, "/runs/"+cl.ns+"/live")
	uitest.WaitFor(t, ctx, "the run's status", `document.body.dataset.phase === 'Running'`)
	uitest.WaitFor(t, ctx, "the timeline so far", `document.querySelectorAll('#timeline li[data-kind="tool"]').length === 3`)
	uitest.WaitFor(t, ctx, "a running tool call", `!!document.querySelector('#timeline > li[data-kind="tool"][data-state="running"]')`)
	// The subagent's tool call is nested under it.
	if n := uitest.Eval[int](t, ctx, `document.querySelectorAll('#timeline li[data-kind="subagent"] > ol > li[data-kind="tool"]').length`); n != 1 {
		t.Errorf("tool calls nested under the subagent: %d", n)
	}
	if s := uitest.Eval[string](t, ctx, `document.querySelector('#timeline li[data-kind="subagent"] .title').textContent`); s != "explore#1 (claude-haiku-4-5)" {
		t.Errorf("the subagent's title %q", s)
	}
	if s := uitest.Eval[string](t, ctx, `document.querySelector('#timeline li.alert[data-kind="network"]').innerText`); !strings.Contains(s, "evil.example:443") || !strings.Contains(s, "not_allowed") {
		t.Errorf("the denied connection: %q", s)
	}
	if s := uitest.Eval[string](t, ctx, `document.querySelector('#timeline li.alert[data-kind="tool"]').innerText`); !strings.Contains(s, "go test ./parse/...") || !strings.Contains(s, "error") {
		t.Errorf("the failed tool call: %q", s)
	}
	uitest.Screenshot(t, ctx, "run-live")

	// The rest of the log comes, and the run ends.
	cl.logs.set("live-pod", fakeLog{data: timelineStream(t, true)})
	uitest.WaitFor(t, ctx, "the end in the timeline", `!!document.querySelector('#timeline > li[data-kind="end"][data-state="finished"]')`)
	uitest.WaitFor(t, ctx, "the log complete", `document.body.dataset.log === 'done'`)
	cl.podState(pod, terminatedState)
	end := phaseStatus(v1alpha1.PhaseSucceeded, "Finished", 35_167, "0.0301")
	end.PodName, end.JobName = "live-pod", "live"
	end.Counters = &v1alpha1.Counters{Tools: 3, ToolErrors: 1, Subagents: 1, DeniedConnections: 1}
	end.Isolation = &v1alpha1.Isolation{Sandbox: v1alpha1.SandboxBubblewrap, NetworkMode: v1alpha1.NetworkCustom, NetworkEnforced: true}
	cl.setStatus(run, end)
	uitest.WaitFor(t, ctx, "the run shown Succeeded", `document.body.dataset.phase === 'Succeeded'`)
	text := uitest.Eval[string](t, ctx, `document.querySelector('main').innerText`)
	for _, want := range []string{"Did the run finish? yes, Finished", "Max tokens", "500.0k", "sandbox Bubblewrap, network Custom (enforced)",
		"claude-sonnet-4-5", "$0.0301", "kubectl -n " + cl.ns + " describe pod live-pod", "kubectl -n " + cl.ns + " logs live-pod -c events",
		"kubectl -n " + cl.ns + " describe job live", "All tests pass.", "Add tests for the parse module", "Denied connections"} {
		if !strings.Contains(text, want) {
			t.Errorf("the run page has no %q", want)
		}
	}
	if n := uitest.Eval[int](t, ctx, `document.querySelectorAll('#timeline li[data-kind="tool"][data-state="running"]').length`); n != 0 {
		t.Errorf("%d tool calls still shown running after the end", n)
	}
	uitest.Screenshot(t, ctx, "run")
	uitest.Clean(t, ctx)

	// A finished run whose Pod is gone: the page says where the outcome
	// is, and shows the status.
	gone := cl.runIn(cl.ns, "gone", nil, spec, phaseStatus(v1alpha1.PhaseSucceeded, "Finished", 100, "0.0001"))
	st2 := gone.Status
	st2.PodName = "gone-pod"
	cl.setStatus(gone, st2)
	uitest.Do(t, ctx, "opening the run whose Pod is gone", chromedp.Navigate(ui.base+"/runs/"+cl.ns+"/gone"))
	uitest.WaitFor(t, ctx, "the log's absence explained", `document.body.dataset.log === 'error' && document.getElementById('log-state').textContent.includes('is gone, and its event log with it')`)
	uitest.Clean(t, ctx)
}

// TestUIStop: the stop button sets the stop in the run's spec, as the
// user; a user whose RBAC allows no patch gets no button, and says why.
func TestUIStop(t *testing.T) {
	cl := newCluster(t)
	st := phaseStatus(v1alpha1.PhaseRunning, "Running", 100, "")
	run := cl.runIn(cl.ns, "to-stop", nil, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, st)
	ui := cl.startUI()
	ctx := ui.open(t, "/runs/"+cl.ns+"/to-stop")
	uitest.WaitFor(t, ctx, "the stop button", `!!document.getElementById('stop-button')`)
	uitest.Do(t, ctx, "asking to stop", chromedp.Click(chromedp.ID("stop-button")))
	uitest.WaitFor(t, ctx, "the confirmation", `!document.getElementById('stop-confirm').hidden`)
	uitest.Screenshot(t, ctx, "run-stop")
	uitest.Do(t, ctx, "confirming", chromedp.Click(chromedp.ID("stop-yes")))
	uitest.WaitFor(t, ctx, "the stop requested", `document.getElementById('summary').textContent.includes('A stop was requested')`)
	got := &v1alpha1.AgentRun{}
	if err := cl.c.Get(cl.ctx, client.ObjectKeyFromObject(run), got); err != nil {
		t.Fatal(err)
	}
	if !got.Spec.Stopped() {
		t.Errorf("the run's spec after the stop: %+v", got.Spec)
	}
	uitest.Clean(t, ctx)

	// A reader: may get, list and watch AgentRuns, not patch them.
	reader := cl.restrictedKubeconfig("reader", []string{"get", "list", "watch"})
	cl.runIn(cl.ns, "not-mine", nil, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, st)
	rui := cl.startUI("--kubeconfig", reader, "-n", cl.ns)
	rctx := rui.open(t, "/runs/"+cl.ns+"/not-mine")
	uitest.WaitFor(t, rctx, "no stop button, and why", `!document.getElementById('stop-button') && document.getElementById('stop').textContent.includes('may not patch AgentRuns')`)
	uitest.Clean(t, rctx)

	// No rights at all: the list says what is missing.
	nobody := cl.restrictedKubeconfig("nobody", nil)
	nui := cl.startUI("--kubeconfig", nobody, "-n", cl.ns)
	nctx := nui.open(t, "/")
	uitest.WaitFor(t, nctx, "the refusal shown", `!document.getElementById('problem').hidden && document.getElementById('problem').textContent.includes('may not list and watch AgentRuns in namespace `+cl.ns+`')`)
	uitest.Clean(t, nctx)
}

// restrictedKubeconfig is a kubeconfig of a user who may do verbs on
// AgentRuns and AgentBudgets in the test's namespace only, and read its
// Pods and their logs (no verbs: nothing at all).
func (cl *cluster) restrictedKubeconfig(name string, verbs []string) string {
	cl.t.Helper()
	user := cl.ns + "-" + name
	if len(verbs) > 0 {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"agentruns", "agentbudgets"}, Verbs: verbs},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}},
		}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		for _, o := range []client.Object{role, binding} {
			if err := cl.c.Create(cl.ctx, o); err != nil {
				cl.t.Fatal(err)
			}
		}
	}
	// The kubeconfig's context has no namespace: -n is given with it.
	path, err := testEnv.Get(cl.t).Kubeconfig(envtest.User{Name: user}, cl.t.TempDir())
	if err != nil {
		cl.t.Fatal(err)
	}
	return path
}

// TestUISpend: the spend page of a namespace against an AgentBudget:
// cost and tokens by model and by runtime as charts and totals, the
// budget's caps, what it spent and the run it holds.
func TestUISpend(t *testing.T) {
	cl := newCluster(t)
	now := time.Now()
	mk := func(name string, rt v1alpha1.Runtime, ago time.Duration, models map[string]v1alpha1.TokenCounts, cost string, labels map[string]string) {
		st := phaseStatus(v1alpha1.PhaseSucceeded, "Finished", 0, "")
		st.StartTime, st.CompletionTime = mtime(now.Add(-ago-time.Minute)), mtime(now.Add(-ago))
		u := &v1alpha1.Usage{ByModel: models, TokenCounts: v1alpha1.TokenCounts{CostUSD: cost}}
		var in, out int64
		for _, c := range models {
			in += *c.InputTokens
			out += *c.OutputTokens
		}
		u.InputTokens, u.OutputTokens, u.TotalTokens = i64(in), i64(out), i64(in+out)
		st.Usage = u
		cl.runIn(cl.ns, name, labels, v1alpha1.AgentRunSpec{Runtime: rt}, st)
	}
	tc := func(in, out int64, cost string) v1alpha1.TokenCounts {
		return v1alpha1.TokenCounts{InputTokens: i64(in), OutputTokens: i64(out), CostUSD: cost}
	}
	team := map[string]string{"team": "a"}
	mk("spend-1", v1alpha1.RuntimeClaudeCode, 20*time.Hour, map[string]v1alpha1.TokenCounts{"claude-sonnet-4-5": tc(40_000, 8_000, "0.90"),
		"claude-haiku-4-5": tc(20_000, 2_000, "0.10")}, "1.00", team)
	mk("spend-2", v1alpha1.RuntimeClaudeCode, 9*time.Hour, map[string]v1alpha1.TokenCounts{"claude-sonnet-4-5": tc(60_000, 9_000, "1.50")}, "1.50", team)
	mk("spend-3", v1alpha1.RuntimeCodex, 5*time.Hour, map[string]v1alpha1.TokenCounts{"gpt-5": tc(90_000, 12_000, "0.75")}, "0.75", nil)
	mk("spend-4", v1alpha1.RuntimePi, 1*time.Hour, map[string]v1alpha1.TokenCounts{"claude-haiku-4-5": tc(30_000, 3_000, "0.20")}, "0.20", team)
	held := phaseStatus(v1alpha1.PhaseQueued, "BudgetExhausted", 0, "")
	held.Conditions = append(held.Conditions, metav1.Condition{Type: v1alpha1.ConditionRunning, Status: metav1.ConditionFalse, Reason: "BudgetExhausted",
		Message: "AgentBudget team-a is spent: cost 2.70 of 2.50; the run waits until the budget has room", LastTransitionTime: metav1.Now()})
	cl.runIn(cl.ns, "spend-held", team, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, held)

	budget := &v1alpha1.AgentBudget{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "team-a"},
		Spec: v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "24h"}, MaxTokens: i64(400_000), MaxCostUSD: "2.50",
			Selector: &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{}}}}
	for k, v := range team {
		budget.Spec.Selector.MatchLabels[k] = v1alpha1.LabelValue(v)
	}
	if err := cl.c.Create(cl.ctx, budget); err != nil {
		t.Fatal(err)
	}
	budget.Status = v1alpha1.AgentBudgetStatus{Spent: v1alpha1.BudgetSpend{Tokens: 172_000, CostUSD: "2.70"}, RunCount: 3,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionExhausted, Status: metav1.ConditionTrue, Reason: "CostSpent",
			Message: "cost 2.70 of 2.50", LastTransitionTime: metav1.Now()}}}
	if err := cl.c.Status().Update(cl.ctx, budget); err != nil {
		t.Fatal(err)
	}
	daily := &v1alpha1.AgentBudget{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "whole-namespace"},
		Spec: v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarMonth}, MaxTokens: i64(2_000_000)}}
	if err := cl.c.Create(cl.ctx, daily); err != nil {
		t.Fatal(err)
	}
	daily.Status = v1alpha1.AgentBudgetStatus{Spent: v1alpha1.BudgetSpend{Tokens: 274_000, CostUSD: "3.45"}, RunCount: 5,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionExhausted, Status: metav1.ConditionFalse, Reason: "WithinBudget", LastTransitionTime: metav1.Now()}}}
	if err := cl.c.Status().Update(cl.ctx, daily); err != nil {
		t.Fatal(err)
	}

	ui := cl.startUI()
	ctx := ui.open(t, "/spend")
	uitest.WaitFor(t, ctx, "the spend page", `document.body.dataset.rendered === 'spend' && document.querySelectorAll('#budget-table tbody tr').length === 2`)
	text := uitest.Eval[string](t, ctx, `document.querySelector('main').innerText`)
	for _, want := range []string{"From the 5 AgentRuns still kept in " + cl.ns, "team-a", "the last 24h, rolling", "172.0k of 400.0k",
		"$2.7000 of $2.5000", "1: spend-held", "Spent (CostSpent)", "whole-namespace", "this calendar month (UTC)", "Within budget.",
		"claude-sonnet-4-5", "gpt-5", "$2.4000", "the AgentRuns labelled team=a"} {
		if !strings.Contains(text, want) {
			t.Errorf("the spend page has no %q", want)
		}
	}
	// The charts are Chart.js's, drawn on their canvases: one bar series
	// per model, in bars of an hour.
	charts := uitest.Eval[[]int](t, ctx, `['cost-chart','tokens-chart','budget-chart'].map(id => document.getElementById(id).width)`)
	for i, w := range charts {
		if w < 300 {
			t.Errorf("chart %d is %d pixels wide", i, w)
		}
	}
	uitest.Screenshot(t, ctx, "spend")
	uitest.Do(t, ctx, "splitting by runtime", chromedp.SetValue(chromedp.ID("s-by"), "runtime"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('s-by').dispatchEvent(new Event('change'))`))
	uitest.WaitFor(t, ctx, "the totals by runtime", `[...document.querySelectorAll('#totals tbody th')].map(e => e.textContent).join(',') === 'claude-code,codex,pi'`)
	uitest.Clean(t, ctx)
}

// hostile is what an agent might write to take over the page: markup,
// script, a javascript: link, terminal escapes (colours, a window title,
// an OSC 8 hyperlink), and a right-to-left override.
const hostile = "<script>window.__pwned='script'</script><img src=x onerror=\"window.__pwned='img'\">" +
	"<a href=\"javascript:window.__pwned='link'\">click me</a>[md](javascript:window.__pwned='md')" +
	"\x1b[31mred\x1b[0m\x1b]0;title\x07\x1b]8;;javascript:alert(1)\x1b\\osc8\x1b]8;;\x1b\\ \u202egnp.exe"

// TestUIHostileContent: a result, a tool summary, a file name, a text, a
// model name and a subagent's description holding markup, script,
// javascript: links and terminal escapes render as inert text: the DOM
// has no element the agent made, no script ran, no link leads to
// javascript:, and no escape character is left.
func TestUIHostileContent(t *testing.T) {
	cl := newCluster(t)
	st := phaseStatus(v1alpha1.PhaseSucceeded, "Finished", 100, "0.0001")
	st.Result, st.Detail, st.PodName = strp("result "+hostile), "detail "+hostile, "evil-pod"
	st.Progress = &v1alpha1.Progress{Activity: "activity " + hostile}
	st.Usage.ByModel = map[string]v1alpha1.TokenCounts{"model " + hostile: st.Usage.TokenCounts}
	run := cl.runIn(cl.ns, "evil", map[string]string{"x": "y"}, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode,
		Prompt: v1alpha1.PromptSource{Text: strp("prompt " + hostile)}}, st)
	var b bytes.Buffer
	w := events.NewWriter(&b)
	put := func(typ string, e events.Event) {
		events.Stamp(e, typ, time.Now())
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	put(events.TypeStart, &events.Start{Runtime: "claude-code", Sandbox: "bubblewrap", Network: events.Network{Mode: "full", Allow: []string{}, Enforced: true},
		DenyRead: []string{}, Model: events.String("model " + hostile), Argv: []string{}, Env: []string{}})
	put(events.TypePrompt, &events.Prompt{Text: "prompt " + hostile, Images: []string{"image " + hostile + ".png"}})
	put(events.TypeSubagentStart, &events.SubagentStart{ID: "s1", Number: 1, Kind: "Kind" + hostile, Model: events.String(hostile), Description: "description " + hostile})
	put(events.TypeToolStart, &events.ToolStart{ID: "t1", Parent: events.String("s1"), Name: "Read", Summary: "Read: /workspace/" + hostile + ".txt"})
	put(events.TypeTool, &events.Tool{ID: "t1", Parent: events.String("s1"), Name: "Read", Summary: "Read: /workspace/" + hostile + ".txt", Error: events.Bool(true)})
	put(events.TypeText, &events.Text{Text: "text " + hostile})
	put(events.TypeNetwork, &events.NetworkAccess{Host: "host" + hostile, Port: 1, Reason: events.String("reason " + hostile)})
	put(events.TypeEnd, &events.End{Status: events.StatusFinished, Detail: "end " + hostile, Usage: events.NewTotals(), Result: events.String("end result " + hostile)})
	cl.logs.set("evil-pod", fakeLog{data: b.Bytes()})
	cl.pod(run, "evil-pod", terminatedState)

	ui := cl.startUI()
	for _, path := range []string{"/", "/runs/" + cl.ns + "/evil", "/spend"} {
		ctx := ui.open(t, path)
		switch path {
		case "/":
			uitest.WaitFor(t, ctx, "the list", `document.body.dataset.rendered === '1'`)
		case "/spend":
			uitest.WaitFor(t, ctx, "the spend page", `document.body.dataset.rendered === 'spend'`)
		default:
			uitest.WaitFor(t, ctx, "the whole timeline", `document.body.dataset.log === 'done' && document.body.dataset.phase === 'Succeeded'`)
		}
		time.Sleep(300 * time.Millisecond) // an onerror would have fired by now
		checks := uitest.Eval[map[string]any](t, ctx, `({
			pwned: window.__pwned || '',
			scripts: [...document.scripts].map(s => s.src).filter(s => !s.endsWith('/static/app.js')).length,
			images: document.querySelectorAll('main img, main iframe, main object, main embed, main svg').length,
			badLinks: [...document.querySelectorAll('a')].filter(a => !/^https?:/.test(a.href) || !a.href.startsWith(location.origin)).length,
			handlers: [...document.querySelectorAll('main *')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
			escapes: /[\u001b\u0007\u202e]/.test(document.body.textContent),
			literal: document.body.textContent.includes("<script>window.__pwned='script'</script>") && document.body.textContent.includes('onerror='),
		})`)
		t.Logf("%s: %v", path, checks)
		if checks["pwned"] != "" || checks["scripts"] != float64(0) || checks["images"] != float64(0) || checks["badLinks"] != float64(0) ||
			checks["handlers"] != float64(0) || checks["escapes"] != false || checks["literal"] != true {
			t.Errorf("%s: the agent's text was not inert: %v", path, checks)
		}
		switch path {
		case "/":
			uitest.Screenshot(t, ctx, "hostile-runs")
		case "/spend":
		default:
			uitest.Screenshot(t, ctx, "hostile-run")
		}
		uitest.Clean(t, ctx)
	}
}

// TestUIRefusals: the server answers only its own page. Requests without
// the token (the event streams too), with a wrong one, with a foreign
// Host (DNS rebinding) or Origin, from another site, and a POST without
// the page's CSRF token are refused; in a real browser, a cross-site
// form POST to the stop endpoint and a page reached through a rebound
// name are refused, and the run is not stopped.
func TestUIRefusals(t *testing.T) {
	cl := newCluster(t)
	run := cl.runIn(cl.ns, "target", nil, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, phaseStatus(v1alpha1.PhaseRunning, "Running", 10, ""))
	ui := cl.startUI()
	host := strings.TrimPrefix(ui.base, "http://")
	cookie := "agentrun-ui-" + host[strings.LastIndex(host, ":")+1:] + "=" + ui.token
	stopPath := "/api/runs/" + cl.ns + "/target/stop"
	body := `{"uid":"` + string(run.UID) + `"}`
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		want               int
	}{
		{"the page without the token", "GET", "/", nil, 401},
		{"the runs stream without the token", "GET", "/api/runs", nil, 401},
		{"a run's stream without the token", "GET", "/api/runs/" + cl.ns + "/target", nil, 401},
		{"the script without the token", "GET", "/static/app.js", nil, 401},
		{"a wrong token", "GET", "/?token=" + strings.Repeat("A", len(ui.token)), nil, 401},
		{"a wrong cookie", "GET", "/", map[string]string{"Cookie": cookie + "x"}, 401},
		{"a foreign Host", "GET", "/", map[string]string{"Cookie": cookie, "Host": "rebind.example:" + host[strings.LastIndex(host, ":")+1:]}, 421},
		{"a foreign Host with the token", "GET", "/?token=" + ui.token, map[string]string{"Host": "attacker.example"}, 421},
		{"a foreign Origin", "GET", "/api/runs", map[string]string{"Cookie": cookie, "Origin": "http://attacker.example"}, 403},
		{"another port's Origin", "GET", "/api/runs", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:1"}, 403},
		{"a cross-site fetch", "GET", "/api/runs", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site"}, 403},
		{"a same-site fetch from another port", "GET", "/api/runs", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site"}, 403},
		{"a POST without the CSRF token", "POST", stopPath, map[string]string{"Cookie": cookie, "Origin": ui.base}, 403},
		{"a POST without an Origin", "POST", stopPath, map[string]string{"Cookie": cookie, "X-CSRF-Token": "x"}, 403},
		{"a cross-site POST", "POST", stopPath, map[string]string{"Cookie": cookie, "Origin": "http://attacker.example", "X-CSRF-Token": "x"}, 403},
		{"a PUT", "PUT", stopPath, map[string]string{"Cookie": cookie, "Origin": ui.base}, 405},
		{"the page with the cookie", "GET", "/", map[string]string{"Cookie": cookie}, 200},
		{"the token, moved to the cookie", "GET", "/?token=" + ui.token, nil, 303},
	} {
		req, err := http.NewRequest(c.method, ui.base+c.path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, res.StatusCode, c.want)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", c.name, csp)
		}
	}

	// A page of another site (another port of this machine) posts a form
	// to the stop endpoint as soon as it loads: the browser sends the
	// request, the server refuses it.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id=f method=post action="%s%s" enctype="text/plain"><input name='{"uid":"%s","x":"' value='"}'></form><script>document.getElementById('f').submit()</script>`,
			ui.base, stopPath, run.UID)
	}))
	defer attacker.Close()
	ctx := ui.open(t, "/")
	uitest.Do(t, ctx, "visiting the attacker's page", chromedp.Navigate(attacker.URL))
	uitest.WaitFor(t, ctx, "the form's answer", `location.href.includes('/stop')`)
	answer := uitest.Eval[string](t, ctx, `document.body.innerText`)
	if !strings.Contains(answer, "refused") && !strings.Contains(answer, "CSRF") {
		t.Errorf("the cross-site POST was answered %q", answer)
	}
	got := &v1alpha1.AgentRun{}
	if err := cl.c.Get(cl.ctx, client.ObjectKeyFromObject(run), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Stopped() {
		t.Error("the cross-site POST stopped the run")
	}

	// DNS rebinding: a name of the attacker's that resolves to 127.0.0.1
	// reaches the port, with the URL's token even; the Host gives it away.
	port := host[strings.LastIndex(host, ":")+1:]
	rctx := uitest.Browser(t, map[string]any{"host-resolver-rules": "MAP rebind.test 127.0.0.1"})
	uitest.Do(t, rctx, "opening the ui through a rebound name", chromedp.Navigate("http://rebind.test:"+port+"/?token="+ui.token))
	if s := uitest.Eval[string](t, rctx, `document.body.innerText`); !strings.Contains(s, "answers only at the address") {
		t.Errorf("through a rebound name the page says %q", s)
	}
	if c := uitest.Eval[string](t, rctx, `document.cookie`); c != "" {
		t.Errorf("the rebound name got a cookie: %q", c)
	}
}
