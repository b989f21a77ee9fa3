package records

import (
	"strings"
	"testing"
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
