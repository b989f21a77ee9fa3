package text

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt from the renderer's output")

// render feeds the events of a jsonl file to a text renderer.
func render(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	r := New(&out, Options{})
	rd := events.NewReader(f)
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := r.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestGolden renders every testdata/NAME.jsonl and compares it with
// testdata/NAME.txt; go test ./events/format/text -update rewrites the goldens.
// seed-example.txt was written by hand, not by the renderer, and is checked, never
// rewritten.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.jsonl")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".jsonl")
		t.Run(name, func(t *testing.T) {
			got := render(t, in)
			golden := strings.TrimSuffix(in, ".jsonl") + ".txt"
			if *update && name != "seed-example" {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs:\n--- got\n%s--- want\n%s", golden, got, want)
			}
			if strings.Contains(got, "\x1b") {
				t.Errorf("text output has an escape sequence")
			}
			for i, l := range strings.Split(got, "\n") {
				if strings.HasSuffix(l, " ") && !strings.HasPrefix(l, " ") && strings.HasPrefix(l, "[") {
					t.Errorf("line %d ends in a space: %q", i+1, l)
				}
			}
		})
	}
}

func TestFormatTokens(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {7, "7"}, {99, "99"}, {100, "0.1k"}, {149, "0.1k"}, {150, "0.1k"}, {151, "0.2k"},
		{912, "0.9k"}, {950, "0.9k"}, {951, "1.0k"}, {14120, "14.1k"}, {65334, "65.3k"},
		{999_949, "999.9k"}, {999_999, "1000.0k"}, {1_000_000, "1.0M"}, {1_250_000, "1.2M"},
		{1_250_001, "1.3M"}, {1_350_000, "1.4M"}, {12_345_678, "12.3M"}, {2_000_000_000, "2000.0M"},
	} {
		if got := FormatTokens(c.n); got != c.want {
			t.Errorf("FormatTokens(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestFormatSeconds(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want string
	}{
		{0, "0.0s"}, {99, "0.0s"}, {100, "0.1s"}, {12400, "12.4s"}, {12460, "12.4s"},
		{31250, "31.2s"}, {59999, "59.9s"}, {600049, "600.0s"}, {-1500, "-1.5s"},
	} {
		if got := FormatSeconds(c.ms); got != c.want {
			t.Errorf("FormatSeconds(%d) = %q, want %q", c.ms, got, c.want)
		}
	}
}

func TestFormatCost(t *testing.T) {
	for _, c := range []struct {
		usd  float64
		want string
	}{
		{0.0436916, "$0.0437"}, {0, "$0.0000"}, {0.00125, "$0.0013"}, {12.5, "$12.5000"},
	} {
		if got := FormatCost(c.usd); got != c.want {
			t.Errorf("FormatCost(%v) = %q, want %q", c.usd, got, c.want)
		}
	}
}

func TestFormatUsage(t *testing.T) {
	i := events.Int64
	for _, c := range []struct {
		name string
		c    events.TokenCounts
		want string
	}{
		{"all null", events.TokenCounts{}, ""},
		{"seed subagent", events.TokenCounts{InputTokens: i(3120), OutputTokens: i(85), CacheReadTokens: i(9800), CacheWriteTokens: i(1200)}, "in 14.1k  out 85  cached 69%"},
		{"output only", events.TokenCounts{OutputTokens: i(5)}, "out 5"},
		{"input only", events.TokenCounts{InputTokens: i(500)}, "in 0.5k"},
		{"cache read only", events.TokenCounts{CacheReadTokens: i(50)}, "in 50  cached 100%"},
		{"zero context", events.TokenCounts{InputTokens: i(0), CacheReadTokens: i(0)}, "in 0"},
		{"half rounds up", events.TokenCounts{InputTokens: i(199), CacheReadTokens: i(1)}, "in 0.2k  cached 1%"},
		{"just under half", events.TokenCounts{InputTokens: i(2001), CacheReadTokens: i(9)}, "in 2.0k  cached 0%"},
		{"cost alone is not usage", events.TokenCounts{CostUSD: events.Float64(1)}, ""},
	} {
		if got := FormatUsage(c.c); got != c.want {
			t.Errorf("%s: FormatUsage = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"a\nb", "a b"},
		{"a\r\nb\rc\nd\n", "a b c d"},
		{"a\n\nb\r\n\r\n", "a  b"},
		{"trailing\r\n", "trailing"},
	} {
		if got := OneLine(c.in); got != c.want {
			t.Errorf("OneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTextLines(t *testing.T) {
	join := func(ls []Line) string {
		var s []string
		for _, l := range ls {
			s = append(s, l.String())
		}
		return strings.Join(s, "\n")
	}
	for _, c := range []struct {
		text    string
		preview int
		want    string
	}{
		{"one", 3, "[main] text one"},
		{"a\nb\nc", 3, "[main] text a\n    b\n    c"},
		{"a\nb\nc\nd", 3, "[main] text a\n    b\n    c\n    … (+1 line)"},
		{"a\n\nb\n \nc\nd\ne", 3, "[main] text a\n    b\n    c\n    … (+2 lines)"},
		{"a\nb\nc\nd\ne", 0, "[main] text a\n    b\n    c\n    d\n    e"},
		{"a\nb\nc", 1, "[main] text a\n    … (+2 lines)"},
		{"\n\n", 3, "[main] text"},
	} {
		if got := join(TextLines("main", c.text, c.preview)); got != c.want {
			t.Errorf("TextLines(%q, %d) =\n%s\nwant\n%s", c.text, c.preview, got, c.want)
		}
	}
}

func TestShowResult(t *testing.T) {
	s := events.String
	for _, c := range []struct {
		name         string
		result, last *string
		want         bool
	}{
		{"null result", nil, s("x"), false},
		{"blank result", s(" \n\t"), nil, false},
		{"same", s("x"), s("x"), false},
		{"same modulo blanks and trailing space", s("\na  \n\nb\n"), s("a\nb   \n\n"), false},
		{"leading space matters", s(" a"), s("a"), true},
		{"differs", s("a"), s("b"), true},
		{"no main text", s("a"), nil, true},
		{"more than three lines", s("a\nb\nc\nd"), s("a\nb\nc\nd"), true},
		{"three lines", s("a\nb\n\nc"), s("a\nb\nc"), false},
		{"prefix", s("a\nb"), s("a\nb\nc"), true},
	} {
		if got := ShowResult(c.result, c.last); got != c.want {
			t.Errorf("%s: ShowResult = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNote(t *testing.T) {
	var out bytes.Buffer
	r := New(&out, Options{})
	if err := r.Note("--session-dir /w/s is inside the working directory. The agent can change the saved sessions"); err != nil {
		t.Fatal(err)
	}
	want := "[note] --session-dir /w/s is inside the working directory. The agent can change the saved sessions\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestFormatterModels(t *testing.T) {
	f := NewFormatter()
	id := "s1"
	if got := f.Model(nil); got != "" {
		t.Errorf("main model before start = %q", got)
	}
	f.Event(&events.Start{Model: events.String("opus")})
	if got := f.Model(nil); got != "opus" {
		t.Errorf("main model from start = %q", got)
	}
	f.Event(&events.Usage{Model: events.String("claude-opus-4-7")})
	f.Event(&events.Usage{Model: nil})
	if got := f.Model(nil); got != "claude-opus-4-7" {
		t.Errorf("main model from usage = %q", got)
	}
	f.Event(&events.SubagentStart{ID: id, Number: 3, Kind: "General-Purpose", Model: events.String("haiku")})
	if got := f.Label(&id); got != "general-purpose#3" {
		t.Errorf("label = %q", got)
	}
	if got := f.Model(&id); got != "haiku" {
		t.Errorf("subagent model from start = %q", got)
	}
	f.Event(&events.Usage{Parent: &id, Model: events.String("claude-haiku-4-5")})
	if got := f.Model(&id); got != "claude-haiku-4-5" {
		t.Errorf("subagent model from usage = %q", got)
	}
	if got := f.Model(nil); got != "claude-opus-4-7" {
		t.Errorf("subagent usage changed the main model: %q", got)
	}
}

// TestLongPromptLine: the prompt line shows at most PromptChars characters
// of the first line, a megabyte prompt on one line included.
func TestLongPromptLine(t *testing.T) {
	f := NewFormatter()
	for _, c := range []struct {
		name, prompt, want string
	}{
		{"short", "fix it\nand more", "prompt fix it"},
		{"exactly the bound", strings.Repeat("a", PromptChars), "prompt " + strings.Repeat("a", PromptChars)},
		{"one character over", strings.Repeat("a", PromptChars+1), "prompt " + strings.Repeat("a", PromptChars) + "…"},
		{"a megabyte of multi-byte characters", strings.Repeat("é", 1<<19), "prompt " + strings.Repeat("é", PromptChars) + "…"},
		{"cut at a space", strings.Repeat("a", PromptChars-1) + " b", "prompt " + strings.Repeat("a", PromptChars-1) + "…"},
	} {
		lines := f.Event(&events.Prompt{Text: c.prompt})
		if len(lines) != 1 || lines[0].Text != c.want {
			t.Errorf("%s: %q, want %q", c.name, lines, c.want)
		}
	}
}
