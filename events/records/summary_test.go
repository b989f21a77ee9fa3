package records

import (
	"math/rand"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSummary(t *testing.T) {
	long := strings.Repeat("x", 200)
	tests := []struct {
		name, tool, detail, want string
	}{
		{"name only", "Read", "", "Read"},
		{"detail", "Bash", "cargo test", "Bash: cargo test"},
		{"multi-line", "Bash", "cd a &&\n  make\ttest\r\n", "Bash: cd a && make test"},
		{"line separator", "Bash", "a\u2028b", "Bash: a b"},
		{"invalid utf-8", "Bash", "a\xffb", "Bash: a\uFFFDb"},
		{"cut", "Bash", long, "Bash: " + strings.Repeat("x", 113) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summary(tt.tool, tt.detail)
			if got != tt.want {
				t.Errorf("Summary = %q, want %q", got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > MaxSummary {
				t.Errorf("summary has %d characters, max %d", n, MaxSummary)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("héllo wörld", 7); got != "héllo…" {
		t.Errorf("Truncate = %q", got)
	}
	if got := Truncate("short", 120); got != "short" {
		t.Errorf("Truncate = %q", got)
	}
}

// oneLineSlow is OneLine without its shortcut for strings it gives as they
// are: TestOneLineShortcut and FuzzOneLine hold the shortcut to it.
func oneLineSlow(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || r == '\u2028' || r == '\u2029' || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

func TestOneLineShortcut(t *testing.T) {
	pieces := []string{"a", "Z", "0", "~", "!", " ", "  ", "\t", "\n", "\r", "\x00", "\x1f", "\x7f", "\u0085", "\u00a0",
		"\u2028", "\u2029", "\u3000", "é", "\xff", "\xc3", "\U0001F600"}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		var b strings.Builder
		for n := rng.Intn(8); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		if s := b.String(); OneLine(s) != oneLineSlow(s) {
			t.Fatalf("OneLine(%q) = %q, want %q", s, OneLine(s), oneLineSlow(s))
		}
	}
}

func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"", "a b", " a", "a ", "a  b", "a\tb", "\x7f", "é", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := OneLine(s), oneLineSlow(s); got != want {
			t.Fatalf("OneLine(%q) = %q, want %q", s, got, want)
		}
	})
}
