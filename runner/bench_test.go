package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/adapters/claudecode"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/format"
)

// benchBlock is a 64 MiB stream built from the real claude-code captures,
// repeated with ids renamed per copy so that calls, tools and subagents are
// all distinct (the adapter and aggregator see a long run, not one run
// replayed). The benchmarks feed it again and again into one pipeline, so
// b.N copies make b.N*64 MiB of stream: -benchtime 8x is 512 MiB.
var benchBlock []byte

const benchBlockSize = 64 << 20

func loadBenchBlock(b *testing.B) []byte {
	b.Helper()
	if benchBlock != nil {
		return benchBlock
	}
	files, err := filepath.Glob(filepath.Join("..", "adapters", "claudecode", "testdata", "real", "*.jsonl"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no captures: %v", err)
	}
	sort.Strings(files)
	var lines [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		lines = append(lines, bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))...)
	}
	var buf bytes.Buffer
	buf.Grow(benchBlockSize + 1<<20)
	for copyN := 0; buf.Len() < benchBlockSize; copyN++ {
		tag := []byte(fmt.Sprintf("_c%d_", copyN))
		for _, l := range lines {
			l = bytes.ReplaceAll(l, []byte("toolu_mock_"), append([]byte("toolu_mock"), tag...))
			l = bytes.ReplaceAll(l, []byte("msg_mock_"), append([]byte("msg_mock"), tag...))
			buf.Write(l)
			buf.WriteByte('\n')
		}
	}
	benchBlock = buf.Bytes()
	return benchBlock
}

// heapMB is the live heap after a collection.
func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// peakRSSMB is the process's peak resident memory so far (the 64 MiB
// block included); hack/bench.sh runs each benchmark in its own process.
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

// BenchmarkStreamBaseline only splits lines and decodes each line's type.
func BenchmarkStreamBaseline(b *testing.B) {
	block := loadBenchBlock(b)
	b.SetBytes(int64(len(block)))
	b.ResetTimer()
	var first float64
	for i := 0; i < b.N; i++ {
		lr := newLineReader(bytes.NewReader(block), MaxLine)
		for {
			line, err := lr.next()
			if errors.Is(err, io.EOF) {
				break
			}
			var head struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(line, &head)
		}
		if i == 0 {
			first = heapMB()
		}
	}
	b.StopTimer()
	b.ReportMetric(first, "heap-first-MB")
	b.ReportMetric(heapMB(), "heap-last-MB")
	b.ReportMetric(peakRSSMB(), "peak-rss-MB")
}

// BenchmarkStreamTranslate is `agentrun translate` without the process:
// split, adapt, aggregate and encode every event as JSON.
func BenchmarkStreamTranslate(b *testing.B) {
	block := loadBenchBlock(b)
	agg := aggregator.New(format.NewJSONL(io.Discard).Event, time.Now)
	pipe := newPipeline(claudecode.New(), agg)
	b.SetBytes(int64(len(block)))
	b.ResetTimer()
	var first float64
	for i := 0; i < b.N; i++ {
		if err := pipe.consume(bytes.NewReader(block), nil, nil, func(string) {}, true); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first = heapMB()
		}
	}
	pipe.close()
	agg.Finish(aggregator.Outcome{Status: "finished"})
	b.StopTimer()
	b.ReportMetric(first, "heap-first-MB")
	b.ReportMetric(heapMB(), "heap-last-MB")
	b.ReportMetric(peakRSSMB(), "peak-rss-MB")
}
