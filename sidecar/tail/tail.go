// Package tail follows an event file as the runner writes it, for the
// `events` sidecar of an agent Pod (`agentrun tail FILE`): every byte of
// the file goes to stdout as soon as it is written, so `kubectl logs -c
// events` shows the run live and, after the run, holds the whole stream
// with the end event as its last line.
//
// It stops after it has copied the end event, or, when it is told to stop
// (the kubelet's SIGTERM once the agent container has exited), after it
// has copied everything the file holds by then.
package tail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/agentrun-dev/agentrun/events"
)

// DefaultPoll is how often the file is checked for new data: the events
// arrive at human speed, and a stat and read every 100 ms cost nothing.
const DefaultPoll = 100 * time.Millisecond

// prefixBytes is how much of each line is kept to find its type. Events
// start with schema, type and time, so the type is within the first 40
// bytes; a longer line (a big result) streams through without being held.
const prefixBytes = 256

// Options say what to follow and when to stop.
type Options struct {
	// Path is the event file; it may not exist yet.
	Path string
	// Poll is the check interval (DefaultPoll when zero).
	Poll time.Duration
	// Linger is how long to wait after the end event for ctx to end
	// before returning. A Kubernetes sidecar that exits while the agent
	// container still runs is restarted (and would replay the file), so
	// the sidecar waits for the kubelet's SIGTERM.
	Linger time.Duration
}

// Result says how Follow stopped.
type Result struct {
	SawEnd bool  // the end event was copied
	Bytes  int64 // bytes copied
}

// Follow copies the file at o.Path to out as it grows, until it has copied
// the end event or ctx ends. When ctx ends first, Follow copies what the
// file holds by then (ending a cut last line with a newline) and returns.
// Only I/O errors are errors.
func Follow(ctx context.Context, o Options, out io.Writer) (Result, error) {
	poll := o.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	var res Result
	f, err := waitOpen(ctx, o.Path, poll)
	if f == nil || err != nil {
		return res, err
	}
	defer f.Close()

	buf := make([]byte, 64<<10)
	var line lineState
	var pos int64
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return res, werr
			}
			res.Bytes += int64(n)
			pos += int64(n)
			if line.feed(buf[:n]) {
				res.SawEnd = true
				return res, linger(ctx, o.Linger)
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return res, err
		}
		// At the end of the file for now.
		if ctx.Err() != nil {
			if line.partial() {
				_, err := out.Write([]byte("\n"))
				return res, err
			}
			return res, nil
		}
		if st, err := f.Stat(); err == nil && st.Size() < pos {
			// Truncated under us: start again from the top.
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return res, err
			}
			pos, line = 0, lineState{}
			continue
		}
		wait(ctx, poll)
	}
}

// waitOpen opens path once it exists. It returns nil, nil when ctx ends
// first: a run that never started has nothing to copy.
func waitOpen(ctx context.Context, path string, poll time.Duration) (*os.File, error) {
	for {
		f, err := os.Open(path)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		wait(ctx, poll)
	}
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func linger(ctx context.Context, d time.Duration) error {
	if d > 0 {
		wait(ctx, d)
	}
	return nil
}

// lineState tracks the line being copied: its first bytes, to find the
// type of the event once the line is complete.
type lineState struct {
	prefix []byte
	inLine bool // bytes of an unfinished line were copied
}

// feed takes copied bytes and reports whether a complete end event line
// was among them.
func (l *lineState) feed(b []byte) bool {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := prefixBytes - len(l.prefix); room > 0 {
			l.prefix = append(l.prefix, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			l.inLine = true
			return false
		}
		end := IsEnd(l.prefix)
		l.prefix, l.inLine = l.prefix[:0], false
		if end {
			return true
		}
		b = b[i+1:]
	}
	return false
}

func (l *lineState) partial() bool { return l.inLine }

// IsEnd reports whether a line (or its first bytes) is an end event: its
// top-level "type" is "end".
func IsEnd(prefix []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		if key == "type" {
			v, err := dec.Token()
			return err == nil && v == events.TypeEnd
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}
