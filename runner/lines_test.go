package runner

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(t *testing.T, in string, max int) (lines []string, tooLong []int) {
	t.Helper()
	lr := newLineReader(strings.NewReader(in), max)
	for {
		l, err := lr.next()
		var tl errLineTooLong
		switch {
		case errors.As(err, &tl):
			tooLong = append(tooLong, tl.size)
			continue
		case errors.Is(err, io.EOF):
			return
		case err != nil:
			t.Fatal(err)
		}
		lines = append(lines, string(l))
	}
}

func TestLineReader(t *testing.T) {
	big := strings.Repeat("a", 300<<10) // over the 256 KiB buffer
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		tooLong []int
	}{
		{"lf only", "a\u2028b\nc\r\n", 1 << 20, []string{"a\u2028b", "c\r"}, nil},
		{"no final lf", "a\nb", 1 << 20, []string{"a", "b"}, nil},
		{"empty lines kept", "\n\nx\n", 1 << 20, []string{"", "", "x"}, nil},
		{"long line within max", big + "\nz\n", 1 << 20, []string{big, "z"}, nil},
		{"long line over max", big + "\nz\n", 1 << 10, []string{"z"}, []int{len(big)}},
		{"long last line over max without lf", "y\n" + big, 1 << 10, []string{"y"}, []int{len(big)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tl := readAll(t, tt.in, tt.max)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines = %q, want %q", trimmed(got), trimmed(tt.want))
			}
			if len(tl) != len(tt.tooLong) || (len(tl) > 0 && tl[0] != tt.tooLong[0]) {
				t.Errorf("too long = %v, want %v", tl, tt.tooLong)
			}
		})
	}
}

func trimmed(s []string) []string {
	out := make([]string, len(s))
	for i, l := range s {
		if len(l) > 20 {
			l = l[:20] + "..."
		}
		out[i] = l
	}
	return out
}
