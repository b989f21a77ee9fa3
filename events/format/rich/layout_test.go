package rich

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
)

func TestWidth(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int
	}{
		{"", 0}, {"abc", 3}, {"测试", 4}, {"…", 1}, {"─", 1}, {"⠋", 1}, {"e\u0301", 1}, {"ｆｕｌｌ", 8}, {"🙂", 2},
	} {
		if got := stringWidth(c.s); got != c.want {
			t.Errorf("stringWidth(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		w    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello", 4, "hel…"},
		{"hello", 1, "…"},
		{"hello", 0, ""},
		{"测试全部通过", 12, "测试全部通过"},
		{"测试全部通过", 11, "测试全部通…"},
		{"测试全部通过", 10, "测试全部…"},
		{"测试全部通过", 2, "…"},
	} {
		got := truncate(c.s, c.w)
		if got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.w, got, c.want)
		}
		if stringWidth(got) > c.w && c.w >= 0 {
			t.Errorf("truncate(%q, %d) is %d wide", c.s, c.w, stringWidth(got))
		}
	}
}

func TestRows(t *testing.T) {
	for _, c := range []struct {
		s    string
		w    int
		want int
	}{
		{"", 10, 1}, {"0123456789", 10, 1}, {"0123456789a", 10, 2}, {strings.Repeat("x", 25), 10, 3},
		{"测试", 3, 2}, {"a测试", 4, 2}, {"ab测", 4, 1}, {"abc测", 4, 2},
	} {
		if got := rows(c.s, c.w); got != c.want {
			t.Errorf("rows(%q, %d) = %d, want %d", c.s, c.w, got, c.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\tb", "a    b"},
		{"red \x1b[31mtext\x1b[0m", "red [31mtext[0m"},
		{"bell\a and \x7f and \u0085", "bell and  and "},
		{"bad \xff byte", "bad  byte"},
		{"测试\t通过", "测试    通过"},
	} {
		if got := sanitize(c.in); got != c.want {
			t.Errorf("sanitize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func seedState() panelState {
	return panelState{
		frame: 0,
		main: agentRow{label: "main", model: "claude-sonnet-5-5", tool: "Bash: cargo test",
			elapsed: 12400 * time.Millisecond, context: events.Int64(14120)},
		usage: events.TokenCounts{InputTokens: events.Int64(18234), OutputTokens: events.Int64(912),
			CacheReadTokens: events.Int64(42000), CacheWriteTokens: events.Int64(5100)},
	}
}

func TestStatusLine(t *testing.T) {
	st := seedState()
	full := "⠋ main claude-sonnet-5-5  Bash: cargo test  12.4s  in 65.3k  cached 64%  ctx 14.1k"
	if got := statusLine(st, 100); got != full {
		t.Errorf("status line:\n got %q\nwant %q", got, full)
	}
	// Exactly width-3 columns fits.
	if got := statusLine(st, stringWidth(full)+3); got != full {
		t.Errorf("status line at its width + 3: %q", got)
	}
	// One column less: the tool is cut first.
	if got, want := statusLine(st, stringWidth(full)+2), "⠋ main claude-sonnet-5-5  Bash: cargo te…  12.4s  in 65.3k  cached 64%  ctx 14.1k"; got != want {
		t.Errorf("cut tool:\n got %q\nwant %q", got, want)
	}
	// No room for two columns of tool: it goes, the rest stays.
	rest := "⠋ main claude-sonnet-5-5  12.4s  in 65.3k  cached 64%  ctx 14.1k"
	if got := statusLine(st, stringWidth(rest)+3+3); got != rest {
		t.Errorf("tool dropped:\n got %q\nwant %q", got, rest)
	}
	// Then the whole line is cut.
	if got, want := statusLine(st, 23), "⠋ main claude-sonne…"; got != want {
		t.Errorf("whole line cut:\n got %q\nwant %q", got, want)
	}
	for w := 1; w <= 120; w++ {
		max := w - 3
		if max < 1 {
			max = 1
		}
		if got := statusLine(st, w); stringWidth(got) > max {
			t.Errorf("width %d: status line %q is %d wide", w, got, stringWidth(got))
		}
	}
	// What the runtime did not report is not shown.
	bare := panelState{frame: 3, main: agentRow{label: "main", elapsed: 50 * time.Millisecond}}
	if got, want := statusLine(bare, 80), "⠸ main  0.0s"; got != want {
		t.Errorf("bare status line %q, want %q", got, want)
	}
	// Output is never in the status bar; a missing context is left out.
	st.main.context = nil
	st.main.tool = ""
	st.main.model = ""
	if got, want := statusLine(st, 100), "⠋ main  12.4s  in 65.3k  cached 64%"; got != want {
		t.Errorf("status line %q, want %q", got, want)
	}
}

func TestSubagentLine(t *testing.T) {
	a := agentRow{label: "explore#1", model: "haiku", desc: "查找所有调用 parse_line 的位置",
		tool: "Grep: parse_line", elapsed: 3200 * time.Millisecond, context: events.Int64(14120)}
	full := "⠙ explore#1 haiku  查找所有调用 parse_line 的位置  Grep: parse_line  3.2s  ctx 14.1k"
	if got := subagentLine(a, 1, 100); got != full {
		t.Errorf("subagent line:\n got %q\nwant %q", got, full)
	}
	w := stringWidth(full)
	if got := subagentLine(a, 1, w); got != full {
		t.Errorf("at its own width: %q", got)
	}
	if got, want := subagentLine(a, 1, w-3), "⠙ explore#1 haiku  查找所有调用 parse_line 的…  Grep: parse_line  3.2s  ctx 14.1k"; got != want {
		t.Errorf("description cut:\n got %q\nwant %q", got, want)
	}
	noDesc := "⠙ explore#1 haiku  Grep: parse_line  3.2s  ctx 14.1k"
	if got := subagentLine(a, 1, stringWidth(noDesc)+3); got != noDesc {
		t.Errorf("description dropped:\n got %q\nwant %q", got, noDesc)
	}
	if got, want := subagentLine(a, 1, stringWidth(noDesc)-1), "⠙ explore#1 haiku  Grep: parse_li…  3.2s  ctx 14.1k"; got != want {
		t.Errorf("tool cut:\n got %q\nwant %q", got, want)
	}
	for w := 1; w <= 120; w++ {
		if got := subagentLine(a, 1, w); stringWidth(got) > w {
			t.Errorf("width %d: %q is %d wide", w, got, stringWidth(got))
		}
	}
}

func TestPanelLines(t *testing.T) {
	st := panelState{main: agentRow{label: "main"}}
	if got, want := panelLines(st, 10, 30), []string{"──────────", "⠋ main…"}; !reflect.DeepEqual(got, want) {
		t.Errorf("no subagent yet: %q, want %q", got, want)
	}
	st.subsSeen = true
	if got, want := panelLines(st, 20, 30), []string{strings.Repeat("─", 20), "0 running", "⠋ main  0.0s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("no subagent running: %q, want %q", got, want)
	}
	for i := 0; i < 5; i++ {
		st.subs = append(st.subs, agentRow{label: "explore#" + string(rune('1'+i)), desc: "d"})
	}
	got := panelLines(st, 40, 30)
	want := []string{strings.Repeat("─", 40), "⠋ explore#1  d  0.0s", "⠋ explore#2  d  0.0s", "⠋ explore#3  d  0.0s",
		"⠋ explore#4  d  0.0s", "⠋ explore#5  d  0.0s", "⠋ main  0.0s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("five running:\n%q\nwant\n%q", got, want)
	}
	got = panelLines(st, 40, 5)
	want = []string{strings.Repeat("─", 40), "⠋ explore#1  d  0.0s", "⠋ explore#2  d  0.0s", "… 3 more running", "⠋ main  0.0s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("five running, five rows:\n%q\nwant\n%q", got, want)
	}
	if got := panelLines(st, 40, 1); len(got) != 1 || !strings.HasPrefix(got[0], "⠋ main") {
		t.Errorf("one row: %q", got)
	}
}

func TestFoldCount(t *testing.T) {
	four := []string{"[main] text a", "    b", "    c", "    … (+1 line)"}
	blocks := [][]string{four, four, four}
	for _, c := range []struct{ panel, width, height, want int }{
		{2, 80, 30, 0},
		{2, 80, 14, 0},
		{2, 80, 13, 1},
		{2, 80, 10, 1},
		{2, 80, 9, 2},
		{2, 80, 5, 3},
		{2, 10, 30, 0},
		{2, 10, 20, 0}, // "[main] text a" and "    … (+1 line)" take two rows each at width 10
		{2, 10, 19, 1},
	} {
		if got := foldCount(blocks, c.panel, c.width, c.height); got != c.want {
			t.Errorf("foldCount(panel %d, %dx%d) = %d, want %d", c.panel, c.width, c.height, got, c.want)
		}
	}
}
