package progress

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/podcontract"

	"github.com/agentrun-dev/agentrun/events"
)

// stream is a run of the main agent and one subagent, as the runner writes
// it; the comments say what the text format shows.
var stream = []string{
	`{"schema":1,"type":"start","time":"2026-10-04T13:00:00.000Z","runtime":"claude-code","sandbox":"bubblewrap","network":{"mode":"full","allow":[],"enforced":true},"deny_read":[],"model":"sonnet","cwd":"/workspace","argv":["claude"],"env":[]}`,
	`{"schema":1,"type":"prompt","time":"2026-10-04T13:00:00.500Z","text":"fix the tests\nplease","images":[]}`,
	`{"schema":1,"type":"tool_start","time":"2026-10-04T13:00:01.000Z","id":"t1","parent":null,"name":"Bash","summary":"Bash: sleep 40"}`,
	`{"schema":1,"type":"usage","time":"2026-10-04T13:00:01.100Z","parent":null,"model":"claude-sonnet-5-5","input_tokens":10,"output_tokens":20,"cache_read_tokens":300,"cache_write_tokens":40,"cost_usd":null,"context_tokens":350}`,
	`{"schema":1,"type":"tool","time":"2026-10-04T13:00:41.000Z","id":"t1","parent":null,"name":"Bash","summary":"Bash: sleep 40","denied":false,"error":true}`,
	`{"schema":1,"type":"network","time":"2026-10-04T13:00:42.000Z","host":"evil.example","port":443,"allowed":false,"reason":"not_allowed"}`,
	`{"schema":1,"type":"subagent_start","time":"2026-10-04T13:00:43.000Z","id":"s1","parent":null,"number":1,"kind":"Explore","model":"haiku","description":"look around"}`,
	`{"schema":1,"type":"usage","time":"2026-10-04T13:00:44.000Z","parent":"s1","model":"claude-haiku-4-5","input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.5,"context_tokens":5}`,
	`{"schema":1,"type":"tool","time":"2026-10-04T13:00:45.000Z","id":"t2","parent":"s1","name":"Read","summary":"Read: a.go","denied":true,"error":false}`,
	`{"schema":1,"type":"subagent_end","time":"2026-10-04T13:00:46.000Z","id":"s1","status":"finished","duration_ms":3000,"usage":{"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.5,"by_model":{"claude-haiku-4-5":{"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.5}}}}`,
	`{"schema":1,"type":"text","time":"2026-10-04T13:00:47.000Z","parent":null,"text":"All green."}`,
	`{"schema":1,"type":"end","time":"2026-10-04T13:00:48.000Z","status":"finished","exit_code":0,"detail":"","duration_ms":48000,"usage":{"input_tokens":20,"output_tokens":30,"cache_read_tokens":300,"cache_write_tokens":40,"cost_usd":1.25,"by_model":{"claude-sonnet-5-5":{"input_tokens":15,"output_tokens":24,"cache_read_tokens":300,"cache_write_tokens":40,"cost_usd":0.75},"claude-haiku-4-5":{"input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.5}}},"result":"All green.","session_id":null}`,
}

func TestTrackerFollowsTheStream(t *testing.T) {
	tr := NewTracker()
	want := []struct {
		activity          string
		modelCalls, tools int64
		tokens            int64
	}{
		{"", 0, 0, 0},
		{"[main] prompt fix the tests", 0, 0, 0},
		{"[main] tool Bash: sleep 40", 0, 1, 0},
		// A usage line is not shown: the call still running stays the
		// activity.
		{"[main] tool Bash: sleep 40", 1, 1, 370},
		{"[main] tool Bash: sleep 40 (error)", 1, 1, 370},
		{"[main] net denied evil.example:443 (not_allowed)", 1, 1, 370},
		{"[main] agent start explore#1 (haiku): look around", 1, 1, 370},
		{"[main] agent start explore#1 (haiku): look around", 2, 1, 381},
		{"[explore#1] tool Read: a.go (denied)", 2, 1, 381},
		{"[explore#1] agent finished 3.0s claude-haiku-4-5  in 5  out 6  cached 0%", 2, 1, 381},
		{"[main] text All green.", 2, 1, 381},
		{"[end] finished 48.0s  in 0.4k  out 30  cached 83%  $1.2500", 2, 1, 390},
	}
	var last int64
	for i, line := range stream {
		tr.Line([]byte(line))
		d, _ := tr.Snapshot()
		w := want[i]
		if d.Activity != w.activity || d.ModelCalls != w.modelCalls || d.ToolCalls != w.tools || total(d.Usage.TokenCounts) != w.tokens {
			t.Errorf("after line %d: activity %q model calls %d tool calls %d tokens %d; want %+v",
				i+1, d.Activity, d.ModelCalls, d.ToolCalls, total(d.Usage.TokenCounts), w)
		}
		if d.Version <= last {
			t.Errorf("after line %d: version %d did not go up from %d", i+1, d.Version, last)
		}
		last = d.Version
	}
	d, _ := tr.Snapshot()
	if !d.Ended || d.LastEvent != "2026-10-04T13:00:48.000Z" || d.LastEventTime().IsZero() {
		t.Errorf("end: ended %v last event %q", d.Ended, d.LastEvent)
	}
	if d.Counters.Tools != 2 || d.Counters.ToolErrors != 1 || d.Counters.Denials != 1 || d.Counters.Subagents != 1 || d.Counters.DeniedConnections != 1 {
		t.Errorf("counters %+v", d.Counters)
	}
	// The end's usage replaces the sum: claude-code's total has a cost.
	if *d.Usage.CostUSD != 1.25 || *d.Usage.ByModel["claude-sonnet-5-5"].CostUSD != 0.75 || len(d.Usage.ByModel) != 2 {
		t.Errorf("usage %+v", d.Usage)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the tracker's own document does not validate: %v", err)
	}
}

func TestTrackerIgnoresWhatIsNotAnEvent(t *testing.T) {
	tr := NewTracker()
	before, _ := tr.Snapshot()
	for _, l := range []string{"", "not json", `{"schema":2,"type":"usage","time":"x"}`, `{"schema":1,"type":"future","time":"x"}`,
		`{"schema":1,"type":"usage","time":"x","input_tokens":"many"}`} {
		tr.Line([]byte(l))
	}
	after, _ := tr.Snapshot()
	if after.Version != before.Version {
		t.Errorf("lines that are not known events changed the document: version %d → %d", before.Version, after.Version)
	}
}

// TestTrackerAgreesWithTheTextFormat feeds every stream of the text
// format's golden files: the last activity is the [end] line the text
// format wrote.
func TestTrackerAgreesWithTheTextFormat(t *testing.T) {
	inputs, err := filepath.Glob("../../events/format/text/testdata/*.jsonl")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, in := range inputs {
		jsonl, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		txt, err := os.ReadFile(strings.TrimSuffix(in, ".jsonl") + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		tr := NewTracker()
		w := NewLineWriter(tr)
		// Written in odd pieces, as a pipe delivers them.
		for b := jsonl; len(b) > 0; {
			n := min(len(b), 7)
			w.Write(b[:n])
			b = b[n:]
		}
		d, _ := tr.Snapshot()
		lines := strings.Split(strings.TrimRight(string(txt), "\n"), "\n")
		var endLine string
		for _, l := range lines {
			if strings.HasPrefix(l, "[end]") {
				endLine = l
			}
		}
		if endLine != "" && d.Activity != cut(endLine, MaxActivity) {
			t.Errorf("%s: activity %q, the text format's end line %q", filepath.Base(in), d.Activity, endLine)
		}
		if err := d.Validate(); err != nil {
			t.Errorf("%s: %v", filepath.Base(in), err)
		}
	}
}

func TestLineWriterSkipsOverlongLines(t *testing.T) {
	tr := NewTracker()
	w := NewLineWriter(tr)
	long := `{"schema":1,"type":"text","time":"2026-10-04T13:00:00.000Z","parent":null,"text":"` + strings.Repeat("x", MaxLine) + `"}` + "\n"
	w.Write([]byte(long[:MaxLine/2]))
	w.Write([]byte(long[MaxLine/2:]))
	w.Write([]byte(stream[3] + "\n"))
	d, _ := tr.Snapshot()
	if d.Version != 1 || d.ModelCalls != 1 || strings.Contains(d.Activity, "xxx") {
		t.Errorf("after an overlong line: version %d model calls %d activity %q", d.Version, d.ModelCalls, cut(d.Activity, 40))
	}
	if cap(w.buf) > 2*MaxLine {
		t.Errorf("the line buffer grew to %d bytes", cap(w.buf))
	}
}

func TestActivityIsBounded(t *testing.T) {
	tr := NewTracker()
	tr.Line([]byte(`{"schema":1,"type":"text","time":"2026-10-04T13:00:00.000Z","parent":null,"text":"` + strings.Repeat("é", 1000) + `"}`))
	d, _ := tr.Snapshot()
	if len(d.Activity) > MaxActivity || !strings.HasSuffix(d.Activity, "…") {
		t.Errorf("activity of %d bytes: %q", len(d.Activity), d.Activity[len(d.Activity)-10:])
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
}

func TestMeterFileAndTracker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meter.json")
	if _, ok := ReadMeterFile(path); ok {
		t.Error("a missing meter file reads as a meter")
	}
	m := Meter{Calls: 2, InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40}
	if err := WriteMeterFile(path, m); err != nil {
		t.Fatal(err)
	}
	got, ok := ReadMeterFile(path)
	if !ok || got != m || got.Total() != 100 {
		t.Errorf("read %+v %v", got, ok)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("meter file mode %v (%v): the sidecar runs as another container's user", st.Mode(), err)
	}
	tr := NewTracker()
	tr.SetMeter(got)
	v := tr.doc.Version
	tr.SetMeter(got)
	if tr.doc.Version != v {
		t.Error("an unchanged meter bumped the version")
	}
	m.Calls = 3
	tr.SetMeter(m)
	if d, _ := tr.Snapshot(); d.Version != v+1 || d.Meter.Calls != 3 {
		t.Errorf("meter %+v version %d", d.Meter, d.Version)
	}
}

func serve(t *testing.T, tr *Tracker) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, tr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + podcontract.ProgressPath
}

func TestLongPoll(t *testing.T) {
	tr := NewTracker()
	tr.Line([]byte(stream[0]))
	url := serve(t, tr)
	hc := NewHTTPClient(4)
	ctx := context.Background()

	d, err := Fetch(ctx, hc, url, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != 1 || d.Boot == "" {
		t.Fatalf("first document %+v", d)
	}
	// Nothing changes: the poll returns the same document when its wait is
	// over.
	start := time.Now()
	same, err := Fetch(ctx, hc, url, ptr(d.Cursor()), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); same.Version != d.Version || waited < 250*time.Millisecond {
		t.Errorf("unchanged poll: version %d after %s", same.Version, waited)
	}
	// A change wakes a waiting poll at once.
	go func() {
		time.Sleep(100 * time.Millisecond)
		tr.Line([]byte(stream[3]))
	}()
	start = time.Now()
	next, err := Fetch(ctx, hc, url, ptr(d.Cursor()), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); next.Version != 2 || next.ModelCalls != 1 || waited > 5*time.Second {
		t.Errorf("changed poll: version %d model calls %d after %s", next.Version, next.ModelCalls, waited)
	}
	// Another boot (a restarted sidecar): answered at once.
	start = time.Now()
	other, err := Fetch(ctx, hc, url, &Cursor{Boot: "other", Version: next.Version}, 10*time.Second)
	if err != nil || other.Version != next.Version || time.Since(start) > 5*time.Second {
		t.Errorf("poll with another boot id: %v %+v after %s", err, other, time.Since(start))
	}
}

func TestHandlerIsReadOnly(t *testing.T) {
	url := serve(t, NewTracker())
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, podcontract.ProgressPath, http.StatusMethodNotAllowed},
		{http.MethodPut, podcontract.ProgressPath, http.StatusMethodNotAllowed},
		{http.MethodDelete, podcontract.ProgressPath, http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/debug/pprof/", http.StatusNotFound},
		{http.MethodGet, podcontract.ProgressPath + "?after=x", http.StatusBadRequest},
		{http.MethodHead, podcontract.ProgressPath, http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, strings.TrimSuffix(url, podcontract.ProgressPath)+c.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}

// TestHandlerBoundsConcurrentReaders: the sidecar holds at most maxServing
// requests; the next is turned away at once, and the slots come back.
func TestHandlerBoundsConcurrentReaders(t *testing.T) {
	tr := NewTracker()
	tr.Line([]byte(stream[0]))
	url := serve(t, tr)
	d, _ := tr.Snapshot()
	hc := NewHTTPClient(maxServing + 1)
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = maxServing + 1
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, maxServing)
	for range maxServing {
		go func() { _, err := Fetch(ctx, hc, url, ptr(d.Cursor()), 30*time.Second); errs <- err }()
	}
	var busy error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, busy = Fetch(context.Background(), hc, url, nil, 0); busy != nil {
			break
		}
	}
	if busy == nil || !strings.Contains(busy.Error(), "503") {
		t.Errorf("request past the bound: %v, want 503", busy)
	}
	cancel()
	for range maxServing {
		// Each long poll ends with its cancelled context's error.
		if err := <-errs; err == nil {
			t.Error("a long poll ended with a document, want its cancellation")
		}
	}
	if _, err := Fetch(context.Background(), NewHTTPClient(1), url, nil, 0); err != nil {
		t.Errorf("after the long polls ended: %v", err)
	}
}

func TestFetchDistrustsThePod(t *testing.T) {
	valid := func() map[string]any {
		tr := NewTracker()
		for _, l := range stream[:5] {
			tr.Line([]byte(l))
		}
		d, _ := tr.Snapshot()
		b, _ := json.Marshal(d)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(valid())
	}))
	defer target.Close()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"valid", func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(valid()) }, ""},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target.URL, http.StatusFound) }, "302"},
		{"error status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusTeapot) }, "418"},
		{"too long", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			m["activity"] = strings.Repeat("x", MaxBytes)
			json.NewEncoder(w).Encode(m)
		}, "longer than"},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>")) }, "progress document"},
		{"other version", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			m["v"] = 2
			json.NewEncoder(w).Encode(m)
		}, "version 2"},
		{"negative tokens", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			m["usage"].(map[string]any)["input_tokens"] = -5
			json.NewEncoder(w).Encode(m)
		}, "out of range"},
		{"huge cost", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			m["usage"].(map[string]any)["cost_usd"] = 1e300
			json.NewEncoder(w).Encode(m)
		}, "cost out of range"},
		{"too many models", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			bm := map[string]any{}
			for i := range MaxModels + 1 {
				bm[strings.Repeat("m", i+1)] = map[string]any{"input_tokens": 1}
			}
			m["usage"].(map[string]any)["by_model"] = bm
			json.NewEncoder(w).Encode(m)
		}, "models"},
		{"long activity", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			m["activity"] = strings.Repeat("x", MaxActivity+1)
			json.NewEncoder(w).Encode(m)
		}, "activity"},
		{"no boot", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			delete(m, "boot")
			json.NewEncoder(w).Encode(m)
		}, "boot"},
		{"bad meter", func(w http.ResponseWriter, _ *http.Request) {
			m := valid()
			m["meter"] = map[string]any{"calls": 1, "input_tokens": -1}
			json.NewEncoder(w).Encode(m)
		}, "meter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			d, err := Fetch(context.Background(), NewHTTPClient(1), srv.URL+podcontract.ProgressPath, nil, 0)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("valid document refused: %v", err)
			case c.want == "" && d.ModelCalls != 1:
				t.Errorf("document %+v", d)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one with %q", err, c.want)
			}
		})
	}
}

// TestFetchGivesUpOnASilentPod: a Pod that accepts the connection and
// never answers costs the reader the wait plus a bounded margin.
func TestFetchGivesUpOnASilentPod(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A stalled peer: it reads the request line (whatever it is) and never
	// answers, until the test is over.
	over := make(chan struct{})
	var peers sync.WaitGroup
	defer func() { close(over); peers.Wait() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peers.Go(func() {
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString('\n')
				<-over
			})
		}
	}()
	start := time.Now()
	_, err = Fetch(context.Background(), NewHTTPClient(1), "http://"+ln.Addr().String()+podcontract.ProgressPath, &Cursor{Boot: "b", Version: 1}, 100*time.Millisecond)
	if err == nil || time.Since(start) > 15*time.Second {
		t.Errorf("silent Pod: %v after %s", err, time.Since(start))
	}
}

func total(c events.TokenCounts) int64 {
	var n int64
	for _, p := range []*int64{c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			n += *p
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }
