package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/claudecode"
	"github.com/agentrun-dev/agentrun/adapters/codex"
	"github.com/agentrun-dev/agentrun/adapters/dsh"
	"github.com/agentrun-dev/agentrun/adapters/pi"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/format"
)

// benchRuntime is one runtime's stream for the benchmarks: 64 MiB built
// from its real captures (adapters/<dir>/testdata/real), repeated with ids
// renamed per copy so that calls, tools and subagents are all distinct (the
// adapter and aggregator see one long run, not one run replayed). The
// benchmarks feed it again and again into one pipeline, so b.N copies make
// b.N*64 MiB of stream: -benchtime 8x is 512 MiB.
type benchRuntime struct {
	name string // the runtime's name, the sub-benchmark's
	dir  string // its adapter's directory under adapters/
	new  func() adapters.Adapter
	// rename returns line with its ids made those of copy copyN; capture
	// counts every capture of every copy (dsh's call ids are turn numbers).
	rename func(line []byte, copyN, capture int) []byte
}

var benchRuntimes = []benchRuntime{
	{name: claudecode.Name, dir: "claudecode", new: func() adapters.Adapter { return claudecode.New() },
		rename: func(l []byte, copyN, _ int) []byte {
			tag := fmt.Sprintf("_c%d_", copyN)
			l = bytes.ReplaceAll(l, []byte("toolu_mock_"), []byte("toolu_mock"+tag))
			return bytes.ReplaceAll(l, []byte("msg_mock_"), []byte("msg_mock"+tag))
		}},
	// codex numbers its calls itself (codex-turn-N); its items are
	// item_0, item_1, ... in every run.
	{name: codex.Name, dir: "codex", new: func() adapters.Adapter { return codex.New() },
		rename: func(l []byte, copyN, _ int) []byte {
			return bytes.ReplaceAll(l, []byte(`"id":"item_`), []byte(fmt.Sprintf(`"id":"item_c%d_`, copyN)))
		}},
	// pi numbers its calls itself (pi-call-N); its tool calls have the
	// mock's ids.
	{name: pi.Name, dir: "pi", new: func() adapters.Adapter { return pi.New() },
		rename: func(l []byte, copyN, _ int) []byte {
			return bytes.ReplaceAll(l, []byte("call_mock_"), []byte(fmt.Sprintf("call_mock_c%d_", copyN)))
		}},
	// dsh's adapter translates the events of the run's main session only,
	// so every capture's session becomes one (without that, every capture
	// after the first would be another session's and skipped); its call
	// ids are turn and step (dsh-TURN-STEP), every capture's turn is 1.
	{name: dsh.Name, dir: "dsh", new: func() adapters.Adapter { return dsh.New() },
		rename: func(l []byte, copyN, capture int) []byte {
			l = dshSession.ReplaceAll(l, []byte(`"session-bench"`))
			l = bytes.ReplaceAll(l, []byte(`"turn":1`), []byte(fmt.Sprintf(`"turn":%d`, capture+1)))
			return bytes.ReplaceAll(l, []byte("call_mock_"), []byte(fmt.Sprintf("call_mock_c%d_", copyN)))
		}},
}

var dshSession = regexp.MustCompile(`"session-[0-9a-f-]+"`)

// benchBlocks holds the stream of each runtime benchmarked in this process
// (hack/bench.sh runs one benchmark of one runtime per process).
var benchBlocks = map[string][]byte{}

const benchBlockSize = 64 << 20

func loadBenchBlock(b *testing.B, rt benchRuntime) []byte {
	b.Helper()
	if block := benchBlocks[rt.name]; block != nil {
		return block
	}
	files, err := filepath.Glob(filepath.Join("..", "adapters", rt.dir, "testdata", "real", "*.jsonl"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no captures of %s: %v", rt.name, err)
	}
	sort.Strings(files)
	var captures [][][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		captures = append(captures, bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")))
	}
	var buf bytes.Buffer
	buf.Grow(benchBlockSize + 1<<20)
	for copyN, capture := 0, 0; buf.Len() < benchBlockSize; copyN++ {
		for _, lines := range captures {
			for _, l := range lines {
				buf.Write(rt.rename(l, copyN, capture))
				buf.WriteByte('\n')
			}
			capture++
		}
	}
	benchBlocks[rt.name] = buf.Bytes()
	return buf.Bytes()
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

// BenchmarkStreamBaseline only splits lines and decodes each line's type,
// on each runtime's stream (a sub-benchmark per runtime).
func BenchmarkStreamBaseline(b *testing.B) {
	for _, rt := range benchRuntimes {
		b.Run(rt.name, func(b *testing.B) { benchBaseline(b, loadBenchBlock(b, rt)) })
	}
}

func benchBaseline(b *testing.B, block []byte) {
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
// split, adapt, aggregate and encode every event as JSON, on each
// runtime's stream with its adapter.
func BenchmarkStreamTranslate(b *testing.B) {
	for _, rt := range benchRuntimes {
		b.Run(rt.name, func(b *testing.B) { benchTranslate(b, rt.new(), loadBenchBlock(b, rt)) })
	}
}

func benchTranslate(b *testing.B, a adapters.Adapter, block []byte) {
	agg := aggregator.New(format.NewJSONL(io.Discard).Event, time.Now)
	pipe := newPipeline(a, agg)
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
