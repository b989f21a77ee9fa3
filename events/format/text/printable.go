package text

import (
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Printable is s without what a terminal would act on rather than show:
// C0 control characters but tab and newline (ESC starts every escape
// sequence: a window title, a clipboard write with OSC 52, a cleared
// screen; a bare carriage return overwrites the line), DEL, C1 control
// characters (U+0080 to U+009F; CSI and OSC have one-character forms there)
// and bytes that are not UTF-8 (a lone 0x9b is CSI to an 8-bit terminal).
// The agent decides much of what is shown (its texts, tool summaries, its
// result, the CLI's stderr), so every line the text format writes and the
// stderr passed through go through it; jsonl keeps everything.
func Printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' && c != '\n' || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// NewPrintableWriter passes what is written to w through Printable. A UTF-8
// sequence cut between two writes is held until its end comes.
func NewPrintableWriter(w io.Writer) io.Writer { return &printableWriter{w: w} }

type printableWriter struct {
	mu   sync.Mutex
	w    io.Writer
	held []byte
}

func (p *printableWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	data := append(p.held, b...)
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	p.held = append([]byte(nil), data[cut:]...)
	if out := Printable(string(data[:cut])); out != "" {
		if _, err := io.WriteString(p.w, out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
