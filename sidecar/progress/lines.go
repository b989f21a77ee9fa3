package progress

import "bytes"

// MaxLine is the longest event line the tracker reads. Events that carry a
// whole text can be longer (a long answer, the end event with its result);
// such a line passes through the sidecar's log untouched but the tracker
// skips it, so the sidecar's memory stays bounded. The controller takes the
// end from the end summary and the log, not from here.
const MaxLine = 1 << 20

// LineWriter splits the bytes written to it into lines for a Tracker. It
// never fails, so it can sit beside the sidecar's stdout in an
// io.MultiWriter.
type LineWriter struct {
	t    *Tracker
	buf  []byte
	skip bool // the current line passed MaxLine
}

// NewLineWriter feeds t.
func NewLineWriter(t *Tracker) *LineWriter { return &LineWriter{t: t} }

// Write implements io.Writer.
func (w *LineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !w.skip {
			if len(w.buf)+len(chunk) > MaxLine {
				w.skip, w.buf = true, w.buf[:0]
			} else {
				w.buf = append(w.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !w.skip {
			w.t.Line(w.buf)
		}
		w.buf, w.skip = w.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}
