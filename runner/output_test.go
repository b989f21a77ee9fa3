package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type failAfter struct {
	n   int
	buf bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.buf.Len()+len(p) > f.n {
		k := f.n - f.buf.Len()
		f.buf.Write(p[:k])
		return k, errors.New("no space left on device")
	}
	return f.buf.Write(p)
}

// TestKeptWriter: the first failed write of --raw is reported once, with
// the bytes kept; the reader of the CLI's output never sees an error.
func TestKeptWriter(t *testing.T) {
	var reports []string
	dst := &failAfter{n: 5}
	k := &keptWriter{w: dst, onErr: func(n int64, err error) { reports = append(reports, fmt.Sprintf("%d %v", n, err)) }}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := k.Write([]byte(s)); n != len(s) || err != nil {
			t.Errorf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if dst.buf.String() != "abcde" || len(reports) != 1 || reports[0] != "5 no space left on device" {
		t.Errorf("kept %q, reports %q", dst.buf.String(), reports)
	}
}

// TestCreateError names the missing directory, which is not made.
func TestCreateError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "missing", "raw.jsonl")
	_, err := FilesFor(dir).Create(p, 0o600)
	if msg := CreateError("--raw", p, err); msg != "--raw "+p+": the directory "+filepath.Dir(p)+" does not exist; create it, or pass a file in an existing directory" {
		t.Errorf("message %q", msg)
	}
	if _, err := os.Stat(filepath.Dir(p)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory was made: %v", err)
	}
	_, err = FilesFor(dir).Create(dir, 0o600)
	if msg := CreateError("--events", dir, err); !strings.HasPrefix(msg, "--events "+dir+": is a directory; pass a writable file path") {
		t.Errorf("message %q", msg)
	}
}
