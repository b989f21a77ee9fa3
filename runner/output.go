package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
)

// CreateError words a failure to create one of the run's output files
// (--raw, --events, --summary) as what to do: a missing directory is
// named (none is made), else the cause.
func CreateError(flag, path string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s %s: the directory %s does not exist; create it, or pass a file in an existing directory", flag, path, filepath.Dir(path))
	}
	return fmt.Sprintf("%s %s: %v; pass a writable file path", flag, path, errCause(err))
}

// keptWriter is --raw: the first write error is reported once (onErr,
// with the bytes written so far) and every later write is dropped, so a
// full disk costs the raw copy, never the run or its events.
type keptWriter struct {
	w       io.Writer
	written int64
	failed  bool
	onErr   func(written int64, err error)
}

func (k *keptWriter) Write(p []byte) (int, error) {
	if k.failed {
		return len(p), nil
	}
	n, err := k.w.Write(p)
	k.written += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		k.failed = true
		k.onErr(k.written, err)
	}
	return len(p), nil
}

// outputLost reports an output of the run that could not be written:
// on stderr at once, and to Options.OutputLost (agentrun run's exit code).
func (r *run) outputLost(err error) {
	r.warn(err.Error())
	if r.o.OutputLost != nil {
		r.o.OutputLost(err)
	}
}
