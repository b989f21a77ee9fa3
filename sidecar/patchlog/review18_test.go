package patchlog

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReview18WriteMemoryBounded: the patch container has a 64 MiB memory
// limit, and the agent decides what its patch holds (a binary file of
// random bytes compresses to nothing smaller). Write must not hold the
// whole gzip of a patch over MaxGzip before it finds it too large: it
// would be OOM-killed, and the manager would report a log that does not
// start with the header instead of "too large, push a branch".
func TestReview18WriteMemoryBounded(t *testing.T) {
	const size = 48 << 20
	file := filepath.Join(t.TempDir(), "change.patch")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := Write(&out, file); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("Write allocated %d MiB for a %d MiB patch: want it bounded by what the log can carry (MaxGzip, %d KiB)", alloc>>20, size>>20, MaxGzip>>10)
	}
	p, err := Read(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if p.TooLarge <= MaxGzip || p.Gzip != nil || !strings.HasPrefix(out.String(), tooLarge+" ") {
		t.Errorf("log %q, read %+v: want too-large", out.String(), p)
	}
}
