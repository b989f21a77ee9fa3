package tail

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	startLine = `{"schema":1,"type":"start","time":"2026-10-04T13:00:00.000Z","runtime":"claude-code"}` + "\n"
	textLine  = `{"schema":1,"type":"text","time":"2026-10-04T13:00:01.000Z","parent":null,"text":"hi"}` + "\n"
	endLine   = `{"schema":1,"type":"end","time":"2026-10-04T13:00:02.000Z","status":"finished","exit_code":0}` + "\n"
)

func follow(t *testing.T, ctx context.Context, o Options) (*syncBuffer, chan Result) {
	t.Helper()
	out := &syncBuffer{}
	done := make(chan Result, 1)
	go func() {
		res, err := Follow(ctx, o, out)
		if err != nil {
			t.Errorf("Follow: %v", err)
		}
		done <- res
	}()
	return out, done
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func await(t *testing.T, done chan Result) Result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return")
	}
	return Result{}
}

func TestFollowsUntilEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	out, done := follow(t, context.Background(), Options{Path: path, Poll: 5 * time.Millisecond})
	time.Sleep(20 * time.Millisecond) // the file does not exist yet
	appendFile(t, path, startLine)
	time.Sleep(20 * time.Millisecond)
	appendFile(t, path, textLine[:30]) // a line written in two parts
	time.Sleep(20 * time.Millisecond)
	appendFile(t, path, textLine[30:]+endLine)
	res := await(t, done)
	if !res.SawEnd || out.String() != startLine+textLine+endLine {
		t.Fatalf("SawEnd %v, output:\n%s", res.SawEnd, out.String())
	}
}

func TestHugeEndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	end := `{"schema":1,"type":"end","time":"x","result":"` + strings.Repeat("r", 5<<20) + `"}` + "\n"
	appendFile(t, path, startLine+end)
	out, done := follow(t, context.Background(), Options{Path: path, Poll: time.Millisecond})
	res := await(t, done)
	if !res.SawEnd || out.String() != startLine+end {
		t.Fatalf("SawEnd %v, %d bytes out", res.SawEnd, len(out.String()))
	}
}

func TestStopDrainsWhatIsThere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	out, done := follow(t, ctx, Options{Path: path, Poll: 5 * time.Millisecond})
	appendFile(t, path, startLine+textLine[:25]) // killed mid-line
	time.Sleep(30 * time.Millisecond)
	cancel()
	res := await(t, done)
	if res.SawEnd || out.String() != startLine+textLine[:25]+"\n" {
		t.Fatalf("SawEnd %v, output %q", res.SawEnd, out.String())
	}
}

func TestStopBeforeTheFileExists(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out, done := follow(t, ctx, Options{Path: filepath.Join(t.TempDir(), "never"), Poll: 5 * time.Millisecond})
	time.Sleep(20 * time.Millisecond)
	cancel()
	if res := await(t, done); res.Bytes != 0 || out.String() != "" {
		t.Fatalf("copied %d bytes from a file that never existed", res.Bytes)
	}
}

// TestLingerEndsOnSignal: after end, Follow waits for the signal (the
// kubelet's SIGTERM), not for the whole linger.
func TestLingerEndsOnSignal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, path, startLine+endLine)
	ctx, cancel := context.WithCancel(context.Background())
	_, done := follow(t, ctx, Options{Path: path, Poll: time.Millisecond, Linger: time.Hour})
	select {
	case <-done:
		t.Fatal("Follow returned before the linger or the signal")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if res := await(t, done); !res.SawEnd {
		t.Fatal("end not seen")
	}
}

func TestLingerRunsOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, path, endLine)
	_, done := follow(t, context.Background(), Options{Path: path, Poll: time.Millisecond, Linger: 30 * time.Millisecond})
	if res := await(t, done); !res.SawEnd {
		t.Fatal("end not seen")
	}
}

func TestTruncatedFileStartsOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, path, startLine+textLine)
	out, done := follow(t, context.Background(), Options{Path: path, Poll: 2 * time.Millisecond})
	time.Sleep(30 * time.Millisecond)
	if err := os.WriteFile(path, []byte(startLine), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	appendFile(t, path, endLine)
	res := await(t, done)
	if !res.SawEnd || !strings.HasSuffix(out.String(), startLine+endLine) {
		t.Fatalf("output after truncation: %q", out.String())
	}
}

func TestIsEnd(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{endLine, true},
		{startLine, false},
		{`{"schema":1,"type":"end"`, true}, // cut after the type
		{`{"schema":1,"ty`, false},
		{`{"meta":{"type":"end"},"type":"tool"}`, false},
		{`{"list":["type","end"],"type":"end"}`, true},
		{`["type","end"]`, false},
		{`not json`, false},
		{``, false},
		{`{"type":1}`, false},
	}
	for _, tt := range tests {
		if got := IsEnd([]byte(tt.line)); got != tt.want {
			t.Errorf("IsEnd(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

func TestFeedSplitsLines(t *testing.T) {
	var l lineState
	all := startLine + textLine + endLine
	for i := 0; i < len(all)-1; i++ {
		if l.feed([]byte(all[i : i+1])) {
			t.Fatalf("end reported at byte %d of %d", i, len(all))
		}
	}
	if !l.feed([]byte(all[len(all)-1:])) {
		t.Fatal("end not reported at its newline")
	}
}
