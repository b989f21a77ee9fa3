package runner

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// MaxLine is the longest raw line that is parsed. Longer lines are still
// kept byte for byte in --raw; only their translation is skipped. 64 MiB is
// far above any real event (a tool result of a whole file) and bounds memory.
const MaxLine = 64 << 20

// lineReader splits a stream on LF only: JSON strings may hold U+2028 and
// other separators that are not line ends (claude-code's output has them).
type lineReader struct {
	r    *bufio.Reader
	long []byte
	max  int
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 256<<10), max: max}
}

// errLineTooLong reports a line over the limit; the line has been consumed.
type errLineTooLong struct{ size int }

func (e errLineTooLong) Error() string { return "line too long" }

// next returns the next line without its LF. The slice is valid until the
// next call. The last line of a stream without a final LF is returned too.
func (lr *lineReader) next() ([]byte, error) {
	line, err := lr.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(line) > 0 && errors.Is(err, io.EOF) {
			return line, nil
		}
		return nil, err
	}
	lr.long = append(lr.long[:0], line...)
	size := len(line)
	for {
		line, err = lr.r.ReadSlice('\n')
		size += len(line)
		if size <= lr.max {
			lr.long = append(lr.long, line...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if err == nil {
			size-- // the LF
		}
		if size > lr.max {
			lr.long = lr.long[:0]
			return nil, errLineTooLong{size: size}
		}
		return bytes.TrimSuffix(lr.long, []byte{'\n'}), nil
	}
}
