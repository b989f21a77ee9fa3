package rich

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// fakeClock is a clock the test moves by hand; its ticker fires when the
// test calls tick.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	c   chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 10, 4, 13, 0, 0, 0, time.UTC), c: make(chan time.Time)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Ticker(time.Duration) (<-chan time.Time, func()) { return c.c, func() {} }

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// tick fires the ticker and returns once the redraw it caused is written:
// the second send is taken only when the loop is back at its select.
func (c *fakeClock) tick() {
	c.c <- c.Now()
	c.c <- c.Now()
}

type harness struct {
	t     *testing.T
	term  *vt
	clock *fakeClock
	l     *live
	errs  bytes.Buffer
}

func newHarness(t *testing.T, w, h int, noColor bool) *harness {
	hs := &harness{t: t, term: newVT(w, h), clock: newFakeClock()}
	hs.l = newLive(hs.term, &hs.errs, hs.term.size, hs.clock, noColor)
	t.Cleanup(func() { hs.l.close() })
	return hs
}

func (h *harness) feed(evs ...events.Event) {
	h.t.Helper()
	for _, e := range evs {
		if err := h.l.event(e); err != nil {
			h.t.Fatal(err)
		}
	}
}

func readEvents(t *testing.T, path string) []events.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []events.Event
	r := events.NewReader(f)
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

func textOutput(t *testing.T, evs []events.Event) []string {
	var b bytes.Buffer
	r := text.New(&b, text.Options{})
	for _, e := range evs {
		if err := r.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func lastLine(ls []string) string {
	if len(ls) == 0 {
		return ""
	}
	return ls[len(ls)-1]
}

// The example stream ends with exactly the text format's lines in the
// scrollback and on the screen, the panel gone and the cursor back.
func TestLiveSeedExample(t *testing.T) {
	evs := readEvents(t, "../text/testdata/seed-example.jsonl")
	h := newHarness(t, 100, 30, false)
	h.feed(evs[:len(evs)-1]...)
	if h.term.cursor {
		t.Error("cursor visible while the panel is drawn")
	}
	screen := h.term.lines()
	if !strings.HasPrefix(lastLine(screen), "⠋ main claude-haiku-4-5") && !strings.HasPrefix(lastLine(screen), "⠋ main") {
		t.Errorf("no status bar: %q", screen)
	}
	h.feed(evs[len(evs)-1])
	want := textOutput(t, evs)
	if got := h.term.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("after end:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !h.term.cursor {
		t.Error("cursor not restored")
	}
	if len(h.term.unknown) > 0 {
		t.Errorf("unknown sequences: %q", h.term.unknown)
	}
	out := h.term.output()
	if !strings.Contains(out, dimOn+"[explore#1]"+dimOff+" tool Grep: parse_line") {
		t.Errorf("labels not dim: %q", out)
	}
	if strings.Contains(out, dimOn+"[end]") {
		t.Error("[end] is dim")
	}
	if err := h.l.close(); err != nil {
		t.Fatal(err)
	}
	if got := h.term.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("Close changed the screen:\n%s", strings.Join(got, "\n"))
	}
}

func TestLiveNoColor(t *testing.T) {
	evs := readEvents(t, "../text/testdata/seed-example.jsonl")
	h := newHarness(t, 100, 30, true)
	h.feed(evs...)
	out := h.term.output()
	if strings.Contains(out, "\x1b[2m") || strings.Contains(out, "\x1b[22m") {
		t.Error("SGR written with NO_COLOR")
	}
	if !strings.Contains(out, hideCursor) || !strings.Contains(out, showCursor) || !strings.Contains(out, clearDown) {
		t.Error("NO_COLOR dropped the other control sequences")
	}
	if got, want := h.term.all(), textOutput(t, evs); !reflect.DeepEqual(got, want) {
		t.Errorf("NO_COLOR output:\n%s", strings.Join(got, "\n"))
	}
}

func mainText(s string) *events.Text { return &events.Text{Text: s} }
func mainTool(id, summary string) *events.Tool {
	return &events.Tool{ID: id, Name: "Bash", Summary: summary, Error: events.Bool(false)}
}

func TestLiveRecentTexts(t *testing.T) {
	h := newHarness(t, 80, 40, true)
	h.feed(&events.Start{Model: events.String("opus")}, &events.Prompt{Text: "go"},
		mainTool("t0", "Bash: before"),
		mainText("one\ntwo\nthree\nfour\nfive"), mainTool("t1", "Bash: a"), mainTool("t2", "Bash: b"),
		mainText("second"), mainTool("t3", "Bash: c"),
		mainText("third\n\tindented"),
	)
	all := h.term.all()
	want := []string{
		"[main] prompt go",
		"[main] tool Bash: before",
		"[main] text one",
		"    two",
		"    three",
		"    … (+2 lines)",
		"[main] tool Bash: a",
		"[main] tool Bash: b",
		"[main] text second",
		"[main] tool Bash: c",
		"[main] text third",
		"        indented",
		strings.Repeat("─", 80),
	}
	if got := all[:len(all)-1]; !reflect.DeepEqual(got, want) {
		t.Errorf("three texts:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(lastLine(all), "⠋ main opus") {
		t.Errorf("status bar %q", lastLine(all))
	}
	// Everything after the prompt's lines is still on the panel side: the
	// scrollback has nothing of it yet.
	if len(h.term.scrollback) != 0 {
		t.Errorf("scrollback %q", h.term.scrollback)
	}

	// The fourth text collapses the first to its first line.
	h.feed(mainText("fourth"))
	all = h.term.all()
	want = []string{
		"[main] prompt go",
		"[main] tool Bash: before",
		"[main] text one",
		"[main] tool Bash: a",
		"[main] tool Bash: b",
		"[main] text second",
		"[main] tool Bash: c",
		"[main] text third",
		"        indented",
		"[main] text fourth",
		strings.Repeat("─", 80),
	}
	if got := all[:len(all)-1]; !reflect.DeepEqual(got, want) {
		t.Errorf("four texts:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	h.feed(mainText("fifth\nmore"), &events.End{Status: "finished", DurationMs: 2000, Result: events.String("fifth\nmore")})
	want = []string{
		"[main] prompt go",
		"[main] tool Bash: before",
		"[main] text one",
		"[main] tool Bash: a",
		"[main] tool Bash: b",
		"[main] text second",
		"[main] tool Bash: c",
		"[main] text third",
		"        indented",
		"[main] text fourth",
		"[main] text fifth",
		"    more",
		"[end] finished 2.0s",
	}
	if got := h.term.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("at the end:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Texts and panel taller than the terminal: the oldest texts collapse, and
// the live region never scrolls off the screen.
func TestLiveFoldsToHeight(t *testing.T) {
	h := newHarness(t, 60, 10, true)
	four := "a\nb\nc\nd"
	h.feed(&events.Prompt{Text: "p"}, mainText("1 "+four), mainText("2 "+four))
	// 2 × 4 rows + 2 panel rows = 10: both fit, the prompt line scrolled
	// off the screen.
	screen := h.term.lines()
	if len(screen) != 10 || screen[0] != "[main] text 1 a" || h.term.scrollback[0] != "[main] prompt p" {
		t.Fatalf("two texts:\n%s", strings.Join(screen, "\n"))
	}
	// A third one does not fit: the first collapses.
	h.feed(mainText("3 " + four))
	want := []string{
		"[main] prompt p",
		"[main] text 1 a",
		"[main] text 2 a",
		"    b",
		"    c",
		"    … (+1 line)",
		"[main] text 3 a",
		"    b",
		"    c",
		"    … (+1 line)",
	}
	all := h.term.all()
	if got := all[:len(all)-2]; !reflect.DeepEqual(got, want) {
		t.Errorf("folded:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The panel is at the bottom and the screen holds no stale rows.
	screen = h.term.lines()
	if len(screen) > 10 || !strings.HasPrefix(screen[len(screen)-2], "───") {
		t.Errorf("screen:\n%s", strings.Join(screen, "\n"))
	}
	// A redraw replaces the live region in place.
	h.clock.advance(time.Second)
	h.clock.tick()
	if got := h.term.all(); len(got) != len(all) || got[len(got)-1] == all[len(all)-1] {
		t.Errorf("redraw:\n%s\nbefore\n%s", strings.Join(got, "\n"), strings.Join(all, "\n"))
	}
}

func TestLiveStatusBarAndSubagents(t *testing.T) {
	h := newHarness(t, 100, 30, true)
	s1 := "s1"
	h.feed(&events.Start{Model: events.String("opus")}, &events.Prompt{Text: "p"},
		&events.ToolStart{ID: "t1", Name: "Bash", Summary: "Bash: go test"})
	h.clock.advance(1234 * time.Millisecond)
	h.clock.tick()
	if got, want := lastLine(h.term.lines()), "⠹ main opus  Bash: go test  1.2s"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	h.feed(&events.ToolStart{ID: "t2", Name: "Read", Summary: "Read: a.go"},
		&events.Usage{Model: events.String("claude-opus-4-7"), InputTokens: events.Int64(1000),
			OutputTokens: events.Int64(50), CacheReadTokens: events.Int64(4000), CacheWriteTokens: events.Int64(0),
			ContextTokens: events.Int64(5000)},
		&events.SubagentStart{ID: s1, Number: 1, Kind: "Explore", Model: events.String("haiku"), Description: "look"},
	)
	h.clock.advance(500 * time.Millisecond)
	h.feed(&events.ToolStart{ID: "t3", Parent: &s1, Name: "Grep", Summary: "Grep: x"},
		&events.Usage{Parent: &s1, Model: events.String("claude-haiku-4-5"), InputTokens: events.Int64(10),
			CacheReadTokens: events.Int64(90), CacheWriteTokens: events.Int64(0), ContextTokens: events.Int64(100)})
	h.clock.tick()
	screen := h.term.lines()
	want := []string{
		strings.Repeat("─", 100),
		"⠧ explore#1 claude-haiku-4-5  look  Grep: x  0.5s  ctx 0.1k",
		"⠧ main claude-opus-4-7  Read: a.go  1.7s  in 5.1k  cached 80%  ctx 5.0k",
	}
	if got := screen[len(screen)-3:]; !reflect.DeepEqual(got, want) {
		t.Errorf("panel:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The latest started tool that has not ended is the current one.
	h.feed(&events.Tool{ID: "t2", Name: "Read", Summary: "Read: a.go"})
	h.clock.tick()
	if got := lastLine(h.term.lines()); !strings.Contains(got, "Bash: go test") {
		t.Errorf("after t2 ended: %q", got)
	}
	h.feed(&events.Tool{ID: "t1", Name: "Bash", Summary: "Bash: go test"}, &events.SubagentEnd{ID: s1, Status: "finished", DurationMs: 700,
		Usage: events.Totals{TokenCounts: events.TokenCounts{InputTokens: events.Int64(10), CacheReadTokens: events.Int64(90), CacheWriteTokens: events.Int64(0)}}})
	screen = h.term.lines()
	want = []string{
		strings.Repeat("─", 100),
		"0 running",
		"⠧ main claude-opus-4-7  1.7s  in 5.1k  cached 80%  ctx 5.0k",
	}
	if got := screen[len(screen)-3:]; !reflect.DeepEqual(got, want) {
		t.Errorf("panel:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := screen[len(screen)-4], "[explore#1] agent finished 0.7s claude-haiku-4-5  in 0.1k  cached 90%"; got != want {
		t.Errorf("end line of the subagent %q, want %q", got, want)
	}
}

func TestLiveStderr(t *testing.T) {
	h := newHarness(t, 80, 20, true)
	w := stderrWriter{h.l}
	h.feed(&events.Prompt{Text: "p"})
	io.WriteString(w, "warn: one\nwarn: tw")
	io.WriteString(w, "o\r\n")
	h.feed(mainText("t"))
	io.WriteString(w, "after\ttext\npartial")
	all := h.term.all()
	want := []string{"[main] prompt p", "warn: one", "warn: two", "[main] text t", "after    text"}
	if got := all[:len(all)-2]; !reflect.DeepEqual(got, want) {
		t.Errorf("stderr lines:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// "partial" has no newline: it comes out at the end, before [end].
	h.feed(&events.End{Status: "finished", DurationMs: 100, Result: events.String("t")})
	want = append(want, "partial", "[end] finished 0.1s")
	if got := h.term.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("at the end:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h.errs.Len() != 0 {
		t.Errorf("stderr written directly: %q", h.errs.String())
	}
}

func TestLiveCloseWithoutEnd(t *testing.T) {
	h := newHarness(t, 80, 20, false)
	h.feed(&events.Prompt{Text: "p"}, mainText("a\nb"))
	io.WriteString(stderrWriter{h.l}, "tail")
	if h.term.cursor {
		t.Fatal("cursor visible")
	}
	if err := h.l.close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"[main] prompt p", "[main] text a", "    b", "tail"}
	if got := h.term.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("after Close:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !h.term.cursor {
		t.Error("cursor not restored")
	}
	// After the end, stderr goes straight through.
	io.WriteString(stderrWriter{h.l}, "late\n")
	if h.errs.String() != "late\n" {
		t.Errorf("late stderr %q", h.errs.String())
	}
}

// A rejected run ends before any redraw: no panel, no cursor sequences.
func TestLiveRejected(t *testing.T) {
	h := newHarness(t, 80, 20, false)
	h.feed(&events.End{Status: "rejected", Detail: "bad flags\n"})
	if got, want := h.term.output(), "[end] rejected bad flags\r\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func TestLiveTicks(t *testing.T) {
	h := newHarness(t, 80, 20, false)
	h.clock.tick()
	first := lastLine(h.term.lines())
	if first != "⠋ main  0.0s" {
		t.Errorf("first frame %q", first)
	}
	if h.term.cursor {
		t.Error("the panel appeared without hiding the cursor")
	}
	h.clock.advance(Frame)
	h.clock.tick()
	if got := lastLine(h.term.lines()); got != "⠙ main  0.1s" {
		t.Errorf("second frame %q", got)
	}
	if n := strings.Count(h.term.output(), hideCursor); n != 1 {
		t.Errorf("cursor hidden %d times", n)
	}
}
