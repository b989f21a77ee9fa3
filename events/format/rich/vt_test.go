package rich

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// vt is a small terminal emulator for the unit tests: just what rich
// writes (printable text with auto-wrap, \r, \n, CUU, ED 0, SGR, cursor
// visibility), with a scrollback. The tmux test checks a real terminal.
type vt struct {
	mu         sync.Mutex
	w, h       int
	screen     [][]rune // h rows of w cells; 0 is empty or the right half of a wide rune
	scrollback []string
	row, col   int // col == w: the pending-wrap state after the last column
	cursor     bool
	raw        strings.Builder
	unknown    []string // escape sequences vt does not know
}

func newVT(w, h int) *vt {
	t := &vt{w: w, h: h, cursor: true}
	for i := 0; i < h; i++ {
		t.screen = append(t.screen, make([]rune, w))
	}
	return t
}

func (t *vt) size() (int, int) { return t.w, t.h }

func (t *vt) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.raw.Write(p)
	s := string(p)
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			j := i + 1
			if j < len(s) && s[j] == '[' {
				j++
				for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
					j++
				}
				if j >= len(s) {
					t.unknown = append(t.unknown, s[i:])
					break
				}
				t.csiFinal(s[i+2:j], s[j])
				i = j + 1
				continue
			}
			t.unknown = append(t.unknown, s[i:j])
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '\r':
			t.col = 0
		case '\n':
			t.lineFeed()
		default:
			t.put(r)
		}
	}
	return len(p), nil
}

func (t *vt) csiFinal(params string, final byte) {
	switch {
	case final == 'A':
		n := 1
		if params != "" {
			n, _ = strconv.Atoi(params)
		}
		t.row -= n
		if t.row < 0 {
			t.row = 0
		}
		if t.col >= t.w {
			t.col = t.w - 1
		}
	case final == 'J' && (params == "" || params == "0"):
		if t.col < t.w {
			for c := t.col; c < t.w; c++ {
				t.screen[t.row][c] = 0
			}
		}
		for r := t.row + 1; r < t.h; r++ {
			t.screen[r] = make([]rune, t.w)
		}
	case final == 'm':
	case final == 'l' && params == "?25":
		t.cursor = false
	case final == 'h' && params == "?25":
		t.cursor = true
	default:
		t.unknown = append(t.unknown, params+string(final))
	}
}

func (t *vt) lineFeed() {
	if t.row < t.h-1 {
		t.row++
		return
	}
	t.scrollback = append(t.scrollback, t.rowText(0))
	copy(t.screen, t.screen[1:])
	t.screen[t.h-1] = make([]rune, t.w)
}

func (t *vt) put(r rune) {
	rw := runeWidth(r)
	if rw == 0 {
		return
	}
	if t.col+rw > t.w {
		t.col = 0
		t.lineFeed()
	}
	t.screen[t.row][t.col] = r
	if rw == 2 {
		t.screen[t.row][t.col+1] = 0
	}
	t.col += rw
}

func (t *vt) rowText(r int) string {
	var b strings.Builder
	for c := 0; c < t.w; c++ {
		ch := t.screen[r][c]
		switch {
		case ch != 0:
			b.WriteRune(ch)
			if runeWidth(ch) == 2 {
				c++
			}
		default:
			b.WriteByte(' ')
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// lines is the screen, trailing empty rows removed.
func (t *vt) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for r := 0; r < t.h; r++ {
		out = append(out, t.rowText(r))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// all is the scrollback and the screen, as capture-pane -S - shows them.
func (t *vt) all() []string {
	sb := func() []string {
		t.mu.Lock()
		defer t.mu.Unlock()
		return append([]string(nil), t.scrollback...)
	}()
	return append(sb, t.lines()...)
}

func (t *vt) output() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.raw.String()
}
