package ui

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
)

// TestBundleMatchesSources: the committed script is the build of the
// committed sources: its first line names the hash of web/ as
// hack/ui-build.sh computes it (sha256sum of every file in byte order of
// their paths, hashed again). hack/ui-build.sh check rebuilds it and
// compares byte for byte.
func TestBundleMatchesSources(t *testing.T) {
	var paths []string
	err := filepath.WalkDir("web", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel("web", p)
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var sums strings.Builder
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join("web", p))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(b), p)
	}
	want := fmt.Sprintf("%x", sha256.Sum256([]byte(sums.String())))
	bundle, err := os.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^/\* kubectl agentrun ui, built by hack/ui-build.sh from kubectlplugin/ui/web, sources sha256:([0-9a-f]{64}) \*/\n`).FindSubmatch(bundle)
	if m == nil {
		t.Fatal("assets/app.js does not start with the line hack/ui-build.sh writes")
	}
	if string(m[1]) != want {
		t.Errorf("assets/app.js was built from other sources (sha256:%s) than web/ holds (sha256:%s): run hack/ui-build.sh and commit the bundle", m[1], want)
	}
	for _, file := range []string{"app.css", "icon.svg"} {
		if _, err := fs.Stat(assetFiles, "assets/"+file); err != nil {
			t.Errorf("the binary does not embed %s", file)
		}
	}
}

// TestNoMarkupFromData: the page's script never parses a string as
// markup: no innerHTML, outerHTML, insertAdjacentHTML, document.write,
// eval or Function in its sources.
func TestNoMarkupFromData(t *testing.T) {
	entries, err := os.ReadDir("web/src")
	if err != nil {
		t.Fatal(err)
	}
	bad := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*['"]on|\.src\s*=`)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("web/src", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			if bad.MatchString(line) {
				t.Errorf("%s:%d: %s", e.Name(), i+1, strings.TrimSpace(line))
			}
		}
	}
}

func testGuard(t *testing.T) (*guard, string) {
	t.Helper()
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	g := newGuard(addr, "tok", "csrf", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }))
	return g, "agentrun-ui-4242=tok"
}

// TestGuard: every request is checked for its Host, Origin, site, token
// and, for a POST, the CSRF token; the token in the URL moves into the
// cookie.
func TestGuard(t *testing.T) {
	g, cookie := testGuard(t)
	for _, c := range []struct {
		name, method, target, host string
		header                     map[string]string
		want                       int
	}{
		{"with the cookie", "GET", "/", "127.0.0.1:4242", map[string]string{"Cookie": cookie}, 299},
		{"localhost", "GET", "/", "localhost:4242", map[string]string{"Cookie": cookie}, 299},
		{"no token", "GET", "/", "127.0.0.1:4242", nil, 401},
		{"the token of another start", "GET", "/?token=tak", "127.0.0.1:4242", nil, 401},
		{"the token", "GET", "/runs/a/b?token=tok&x=1", "127.0.0.1:4242", nil, 303},
		{"another port", "GET", "/", "127.0.0.1:4243", map[string]string{"Cookie": cookie}, 421},
		{"a rebound name", "GET", "/", "evil.example:4242", map[string]string{"Cookie": cookie}, 421},
		{"a rebound name with the token", "GET", "/?token=tok", "evil.example:4242", nil, 421},
		{"a foreign origin", "GET", "/", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Origin": "http://evil.example"}, 403},
		{"the null origin", "GET", "/", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Origin": "null"}, 403},
		{"its own origin", "GET", "/", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:4242"}, 299},
		{"cross-site", "GET", "/", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site", "GET", "/", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site"}, 403},
		{"typed in", "GET", "/", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "none"}, 299},
		{"a POST of the page", "POST", "/x", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:4242", "X-CSRF-Token": "csrf"}, 299},
		{"a POST without CSRF token", "POST", "/x", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:4242"}, 403},
		{"a POST with a wrong CSRF token", "POST", "/x", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:4242", "X-CSRF-Token": "csrg"}, 403},
		{"a POST without Origin", "POST", "/x", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "X-CSRF-Token": "csrf"}, 403},
		{"a POST with the token in the URL", "POST", "/x?token=tok", "127.0.0.1:4242", map[string]string{"Origin": "http://127.0.0.1:4242", "X-CSRF-Token": "csrf"}, 401},
		{"a DELETE", "DELETE", "/x", "127.0.0.1:4242", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:4242", "X-CSRF-Token": "csrf"}, 405},
	} {
		r := httptest.NewRequest(c.method, "http://"+c.host+c.target, nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, w.Code, c.want, strings.TrimSpace(w.Body.String()))
		}
		if w.Header().Get("Content-Security-Policy") != contentSecurityPolicy || w.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", c.name, w.Header())
		}
		if c.want == 303 {
			if loc := w.Header().Get("Location"); loc != "/runs/a/b?x=1" {
				t.Errorf("%s: redirected to %q", c.name, loc)
			}
			if sc := w.Header().Get("Set-Cookie"); !strings.Contains(sc, "agentrun-ui-4242=tok") || !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
				t.Errorf("%s: cookie %q", c.name, sc)
			}
		}
	}
}

// TestRunRefusesOtherAddresses: the ui listens on loopback only.
func TestRunRefusesOtherAddresses(t *testing.T) {
	for _, a := range []string{"0.0.0.0", "10.0.0.1", "example.com", "::"} {
		if err := Run(t.Context(), Options{Address: a}); err == nil || !strings.Contains(err.Error(), "use a loopback address") {
			t.Errorf("--address %s: %v", a, err)
		}
	}
}

// TestInert: control characters, escape sequences' ESC and the Unicode
// controls that reorder text are dropped; markup stays as characters
// (the page sets it as text).
func TestInert(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                     "plain",
		"<script>alert(1)</script>": "<script>alert(1)</script>",
		"\x1b[31mred\x1b[0m":        "[31mred[0m",
		"a\x07b\x9bc":               "abc",
		"file\u202egnp.exe":         "filegnp.exe",
		"x\u2066y\u2069z\u200fw":    "xyzw",
		"line\nand\ttab":            "line\nand\ttab",
		"family 👨\u200d👩\u200d👧":    "family 👨\u200d👩\u200d👧",
	} {
		if got := inert(in); got != want {
			t.Errorf("inert(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTraceLink: the template gets the id in hex, and only an http(s)
// URL is a link.
func TestTraceLink(t *testing.T) {
	id := "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct{ tmpl, want string }{
		{"https://tempo.example/trace/{traceID}", "https://tempo.example/trace/" + id},
		{"http://localhost:16686/trace/{traceID}?x=1", "http://localhost:16686/trace/" + id + "?x=1"},
		{"javascript:alert('{traceID}')", ""},
		{"", ""},
		{"/relative/{traceID}", ""},
	} {
		if got := traceLink(c.tmpl, id); got != c.want {
			t.Errorf("traceLink(%q) = %q, want %q", c.tmpl, got, c.want)
		}
	}
	if traceIDPattern.MatchString("<script>") || traceIDPattern.MatchString(strings.ToUpper(id)) {
		t.Error("a trace id that is not 32 lower-case hex digits passed")
	}
}

// TestConvertRun: the fields of newer APIs are read from the object
// itself (status.git, status.traceID), managed fields dropped, a long
// prompt cut at a rune.
func TestConvertRun(t *testing.T) {
	long := strings.Repeat("é", promptKept) // two bytes each
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agentrun.dev/v1alpha1", "kind": "AgentRun",
		"metadata": map[string]any{"name": "r", "namespace": "n", "managedFields": []any{map[string]any{"manager": "x"}}},
		"spec":     map[string]any{"runtime": "claude-code", "prompt": map[string]any{"text": long}},
		"status": map[string]any{"phase": "Succeeded", "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
			"git": map[string]any{"branch": "agentrun/r-1234", "filesChanged": int64(3), "insertions": int64(40), "deletions": int64(12), "pushed": true}},
	}}
	info, err := convertRun(u)
	if err != nil {
		t.Fatal(err)
	}
	if info.Run.ManagedFields != nil || info.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || info.Git == nil || info.Git.Branch != "agentrun/r-1234" {
		t.Errorf("converted %+v", info)
	}
	if p := *info.Run.Spec.Prompt.Text; len(p) != promptKept || info.PromptCut != len(long)-promptKept || !strings.HasSuffix(p, "é") {
		t.Errorf("prompt kept %d bytes, cut %d", len(p), info.PromptCut)
	}
	r := newRow(info)
	if r.Branch != "agentrun/r-1234" || r.Diff != "3 files +40 −12" || r.DiffSize != 52 {
		t.Errorf("row %+v", r)
	}
	if len(u.GetManagedFields()) != 1 {
		t.Error("convertRun changed the informer's object")
	}
}

// TestBuckets: hours for two days, days to 62, weeks beyond, each bar
// labelled.
func TestBuckets(t *testing.T) {
	now := time.Date(2026, 10, 4, 14, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		ago   time.Duration
		unit  string
		n     int
		first string
	}{
		{90 * time.Minute, "hour", 2, "Oct 4 13:00"},
		{47 * time.Hour, "hour", 48, "Oct 2 15:00"},
		{3 * 24 * time.Hour, "day", 4, "Thu Oct 1"},
		{70 * 24 * time.Hour, "week", 11, "week of Jul 20 2026"},
	} {
		starts, labels, unit := buckets(now.Add(-c.ago), now, time.UTC)
		if unit != c.unit || len(starts) != c.n || len(labels) != c.n || labels[0] != c.first {
			t.Errorf("%s ago: %s, %d bars, first %q", c.ago, unit, len(labels), labels[0])
		}
	}
}

// TestTimeline: the events of a stream as timeline items: labels of
// subagents as the text format gives them, a tool's end on its start,
// denied connections and failures marked.
func TestTimeline(t *testing.T) {
	tl := newTimeline()
	sub := events.String("s1")
	var got []string
	for _, e := range []events.Event{
		&events.Start{Runtime: "codex", Sandbox: "bubblewrap", Network: events.Network{Mode: "none", Allow: []string{}, Enforced: true}, Model: events.String("gpt-5")},
		&events.Prompt{Text: "fix it", Images: []string{"a.png"}},
		&events.SubagentStart{ID: "s1", Number: 1, Kind: "Explore", Model: events.String("haiku"), Description: "look"},
		&events.ToolStart{ID: "t1", Parent: sub, Name: "Bash", Summary: "Bash: ls"},
		&events.Tool{ID: "t1", Parent: sub, Name: "Bash", Summary: "Bash: ls", Denied: true, Error: events.Bool(false)},
		&events.SubagentEnd{ID: "s1", Status: "failed", DurationMs: 1200, Usage: events.NewTotals()},
		&events.NetworkAccess{Host: "evil.example", Port: 443, Reason: events.String("not_allowed"), Suppressed: 3},
		&events.End{Status: "timeout", DurationMs: 5000, Usage: events.NewTotals(), Detail: "--timeout 5 reached"},
	} {
		events.Stamp(e, typeOf(e), time.Date(2026, 10, 4, 13, 0, 0, 0, time.UTC))
		it, ok := tl.item(e)
		if !ok {
			t.Fatalf("no item for %T", e)
		}
		got = append(got, fmt.Sprintf("%d %s [%s] %s | %s | %s | alert=%t", it.Seq, it.Kind, it.Agent, it.Title, it.State, it.Detail, it.Alert))
	}
	want := []string{
		"1 start [main] codex (gpt-5) started, sandbox bubblewrap, network none |  |  | alert=false",
		"2 prompt [main]  |  | 1 image: a.png | alert=false",
		"3 subagent [main] explore#1 (haiku) | running |  | alert=false",
		"4 tool [explore#1] Bash: ls | running |  | alert=false",
		"5 tool [explore#1] Bash: ls | denied | the runtime's permission check refused the call | alert=true",
		"6 subagent [explore#1] explore#1 (haiku) | failed | 1.2s | alert=true",
		"7 network [main] evil.example:443 | denied | not_allowed and 2 more like it | alert=true",
		"8 end [end] timeout after 5.0s | timeout | --timeout 5 reached | alert=true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("items\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func typeOf(e events.Event) string {
	switch e.(type) {
	case *events.Start:
		return events.TypeStart
	case *events.Prompt:
		return events.TypePrompt
	case *events.SubagentStart:
		return events.TypeSubagentStart
	case *events.SubagentEnd:
		return events.TypeSubagentEnd
	case *events.ToolStart:
		return events.TypeToolStart
	case *events.Tool:
		return events.TypeTool
	case *events.NetworkAccess:
		return events.TypeNetwork
	case *events.End:
		return events.TypeEnd
	}
	return ""
}

// TestCanStop: the button works only for a run in progress that was not
// stopped yet, and says why not.
func TestCanStop(t *testing.T) {
	yes, no := true, false
	running := &v1alpha1.AgentRun{Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}}
	running.Namespace = "team"
	stopped := running.DeepCopy()
	stopped.Spec.Stop = v1alpha1.StopGraceful
	done := &v1alpha1.AgentRun{Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded}}
	for _, c := range []struct {
		run  *v1alpha1.AgentRun
		may  *bool
		ok   bool
		note string
	}{
		{running, &yes, true, "SIGINT"},
		{running, nil, true, "SIGINT"},
		{running, &no, false, "may not patch AgentRuns in namespace team"},
		{stopped, &yes, false, "A stop was requested"},
		{done, &yes, false, "has ended"},
	} {
		ok, note := canStop(c.run, c.may)
		if ok != c.ok || !strings.Contains(note, c.note) {
			t.Errorf("canStop = %t, %q; want %t, %q", ok, note, c.ok, c.note)
		}
	}
	if got := stopCommand("team", "r-1"); got != `kubectl -n team patch agentrun r-1 --type merge -p '`+string(stopPatch)+`'` {
		t.Errorf("stopCommand = %s", got)
	}
}

// TestTimelineInert: what the agent named shows inert in every field of
// an item, the labels of its subagents too.
func TestTimelineInert(t *testing.T) {
	tl := newTimeline()
	evil := "<b>\x1b[31m\u202e"
	sub := events.String("s1")
	for _, e := range []events.Event{
		&events.SubagentStart{ID: "s1", Number: 1, Kind: "K" + evil, Model: events.String(evil), Description: evil},
		&events.ToolStart{ID: "t1", Parent: sub, Name: evil, Summary: evil},
		&events.Text{Parent: sub, Text: evil},
		&events.Usage{Parent: sub, Model: events.String(evil)},
		&events.SubagentEnd{ID: "s1", Status: evil, Usage: events.NewTotals()},
	} {
		events.Stamp(e, "x", time.Now())
		it, _ := tl.item(e)
		for _, f := range []string{it.Agent, it.Title, it.Body, it.Detail, it.State} {
			if strings.ContainsAny(f, "\x1b\u202e") {
				t.Errorf("%T: %q is not inert", e, f)
			}
		}
	}
}

// TestOpenBrowser: the URL goes to $BROWSER as one argument.
func TestOpenBrowser(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	script := filepath.Join(dir, "browser")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s' \"$*\" > "+got+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", script)
	url := "http://127.0.0.1:4242/?token=abc"
	if err := openBrowser(url); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(got); err == nil && string(b) == url {
			return
		}
		if time.Now().After(end) {
			t.Fatal("$BROWSER was not given the URL")
		}
	}
}
