// Package patchlog hands a run's patch (agentrun run --push patch) from
// the agent Pod to the manager, outside the schema-1 stream, and without an
// API token in the Pod: the Pod's `patch` container waits for the run's
// end, then writes the patch, gzipped and in base64, to its own log, which
// the manager reads (pods/log) and keeps in a ConfigMap the AgentRun owns.
// Both ends are here: Write (the container's, `agentrun tail --patch`) and
// Read (the manager's).
//
// The log is:
//
//	agentrun-patch v1 gzip SIZE SHA256   (SIZE and SHA256 of the gzip)
//	BASE64 lines of at most 76 characters
//	agentrun-patch end
//
// or one line `agentrun-patch none` (no patch: nothing changed, or it was
// not published) or `agentrun-patch too-large BYTES` (the gzip is over
// MaxGzip, which a ConfigMap could not hold).
package patchlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxGzip bounds the gzipped patch: a ConfigMap holds at most 1 MiB, with
// room for its metadata.
const MaxGzip = 900 << 10

// MaxLog bounds what the manager reads of the log: the base64 of MaxGzip
// and its line breaks, with room.
const MaxLog = MaxGzip*4/3 + MaxGzip/38 + 4096

// maxPatch bounds what Write reads of the patch file (the runner bounds
// the patch it writes too).
const maxPatch = 512 << 20

const (
	header   = "agentrun-patch v1 gzip"
	trailer  = "agentrun-patch end"
	none     = "agentrun-patch none"
	tooLarge = "agentrun-patch too-large"
)

// Write writes the patch file at path to w in the log's form; a missing
// file is "none".
func Write(w io.Writer, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		_, err = fmt.Fprintln(w, none)
		return err
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// The container's memory is bounded (64 MiB) and the agent decides
	// what the patch holds: only what the log can carry is kept, the rest
	// of the gzip is counted.
	gz := &boundedBuffer{max: MaxGzip}
	zw, _ := gzip.NewWriterLevel(gz, gzip.BestCompression)
	n, err := io.Copy(zw, io.LimitReader(f, maxPatch+1))
	if err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if n > maxPatch || gz.n > MaxGzip {
		_, err = fmt.Fprintf(w, "%s %d\n", tooLarge, gz.n)
		return err
	}
	sum := sha256.Sum256(gz.Bytes())
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s %d %s\n", header, gz.Len(), hex.EncodeToString(sum[:]))
	enc := base64.StdEncoding.EncodeToString(gz.Bytes())
	for len(enc) > 0 {
		n := min(76, len(enc))
		_, _ = bw.WriteString(enc[:n] + "\n") // a bufio.Writer keeps its first error for Flush below
		enc = enc[n:]
	}
	_, _ = bw.WriteString(trailer + "\n")
	return bw.Flush()
}

// boundedBuffer keeps the first max bytes written to it and counts all.
type boundedBuffer struct {
	bytes.Buffer
	max int
	n   int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Patch is what Read found.
type Patch struct {
	// Gzip is the gzipped patch; nil when there is none.
	Gzip []byte
	// TooLarge is set (with the size) when the patch was too large to hand
	// over.
	TooLarge int64
}

// ErrIncomplete is a log that stops before its end (the container was
// killed, or the read was bounded).
var ErrIncomplete = errors.New("the patch log is incomplete")

// Read parses the container's log. A log that does not check out (a wrong
// size or digest, bad base64, no end line) is an error: the manager never
// keeps part of a patch.
func Read(log []byte) (Patch, error) {
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	switch first := strings.TrimSpace(lines[0]); {
	case first == none:
		return Patch{}, nil
	case strings.HasPrefix(first, tooLarge+" "):
		n, err := strconv.ParseInt(strings.TrimPrefix(first, tooLarge+" "), 10, 64)
		if err != nil || n <= 0 {
			return Patch{}, fmt.Errorf("the patch log's first line %q", cut(first))
		}
		return Patch{TooLarge: n}, nil
	case !strings.HasPrefix(first, header+" "):
		return Patch{}, fmt.Errorf("the patch log does not start with %q (%q)", header, cut(first))
	}
	f := strings.Fields(strings.TrimPrefix(lines[0], header+" "))
	if len(f) != 2 {
		return Patch{}, fmt.Errorf("the patch log's header %q", cut(lines[0]))
	}
	size, err := strconv.Atoi(f[0])
	if err != nil || size <= 0 || size > MaxGzip {
		return Patch{}, fmt.Errorf("the patch log's size %q", f[0])
	}
	if len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != trailer {
		return Patch{}, ErrIncomplete
	}
	gz, err := base64.StdEncoding.DecodeString(strings.Join(lines[1:len(lines)-1], ""))
	if err != nil {
		return Patch{}, fmt.Errorf("the patch log's base64: %w", err)
	}
	sum := sha256.Sum256(gz)
	if len(gz) != size || hex.EncodeToString(sum[:]) != f[1] {
		return Patch{}, errors.New("the patch log's size or digest does not match its content")
	}
	return Patch{Gzip: gz}, nil
}

func cut(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
