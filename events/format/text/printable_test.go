package text

import (
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"tab\tand\nnewline", "tab\tand\nnewline"},
		{"title \x1b]0;PWNED\x07 end", "title ]0;PWNED end"},
		{"clipboard \x1b]52;c;ZWNobw==\x1b\\ end", "clipboard ]52;c;ZWNobw==\\ end"},
		{"clear \x1b[2J\x1b[H end", "clear [2J[H end"},
		{"carriage\r return", "carriage return"},
		{"c1 \u009b31m csi \u009d osc", "c1 31m csi  osc"},
		{"raw 8-bit CSI \x9b31m", "raw 8-bit CSI 31m"},
		{"del\x7f bell\x07 nul\x00", "del bell nul"},
		{"ünïcödé ✓ 漢字", "ünïcödé ✓ 漢字"},
	}
	for _, tt := range tests {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPrintableWriterKeepsRunesCutBetweenWrites(t *testing.T) {
	var b strings.Builder
	w := NewPrintableWriter(&b)
	in := "ab ✓\x1b[2J cd 漢"
	for i := 0; i < len(in); i++ { // one byte at a time
		if n, err := w.Write([]byte{in[i]}); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if b.String() != "ab ✓[2J cd 漢" {
		t.Errorf("got %q", b.String())
	}
}
