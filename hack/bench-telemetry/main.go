// Command bench-telemetry measures what exporting a run costs (not a
// test): `agentrun translate` of a large capture (the real claude-code
// captures, repeated with their ids renamed per copy) with the export off
// and on, alternately in the same run, to a real OpenTelemetry Collector on
// 127.0.0.1; then the same replay with the collector down (connections
// refused) and black-holed (accepting and never answering). It prints the
// throughputs and their ratio (target: with export >= 0.9 of without), and
// how much longer the replay took with the collector gone (bounded by the
// 2 s final flush). The collector runs at the lowest CPU priority: on 2
// cores it would otherwise take the replay's (in production it runs on
// other machines). Run it through hack/bench-telemetry.sh.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/telemetry"
	"github.com/agentrun-dev/agentrun/telemetry/telemetrytest"
)

func main() {
	agentrun := flag.String("agentrun", "bin/agentrun", "the agentrun binary")
	collector := flag.String("collector", "", "the collector binary (hack/otel-collector.sh)")
	captures := flag.String("captures", "adapters/claudecode/testdata/real", "directory of claude-code captures (*.jsonl)")
	sizeMiB := flag.Int("size", 64, "MiB of capture to replay")
	rounds := flag.Int("rounds", 3, "replays with and without export (the fastest of each counts)")
	minRatio := flag.Float64("min-ratio", 0.9, "with --check: the least throughput with export, as a share of without")
	check := flag.Bool("check", false, "exit 1 when the ratio is below --min-ratio or a gone collector slows a replay by more than the flush bound")
	flag.Parse()
	if err := run(*agentrun, *collector, *captures, *sizeMiB, *rounds, *minRatio, *check); err != nil {
		fmt.Fprintln(os.Stderr, "bench-telemetry:", err)
		os.Exit(1)
	}
}

func run(agentrun, collectorBin, captures string, sizeMiB, rounds int, minRatio float64, check bool) error {
	dir, err := os.MkdirTemp("", "bench-telemetry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	capture := filepath.Join(dir, "capture.jsonl")
	size, err := buildCapture(captures, capture, int64(sizeMiB)<<20)
	if err != nil {
		return err
	}
	col, err := telemetrytest.Launch(collectorBin, dir)
	if err != nil {
		return err
	}
	defer col.Stop()
	// The collector shares this machine's cores with the replay it
	// measures; in production it runs elsewhere. At the lowest priority it
	// takes only what the replay leaves.
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, col.Pid(), 19); err != nil {
		return fmt.Errorf("renice the collector: %w", err)
	}
	hole, err := telemetrytest.NewBlackHole()
	if err != nil {
		return err
	}
	defer hole.Close()

	var off, on []time.Duration
	var offEnd, onEnd string
	for i := 0; i < rounds; i++ {
		d, end, _, err := replay(agentrun, capture, "")
		if err != nil {
			return err
		}
		off, offEnd = append(off, d), end
		d, end, stderr, err := replay(agentrun, capture, col.HTTPURL())
		if err != nil {
			return err
		}
		if strings.Contains(stderr, "telemetry:") {
			return fmt.Errorf("the export to a working collector failed: %s", stderr)
		}
		on, onEnd = append(on, d), end
	}
	if offEnd != onEnd {
		return fmt.Errorf("the export changed the end:\n without %s\n with    %s", offEnd, onEnd)
	}
	best := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[0]
	}
	mbps := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	bOff, bOn := best(off), best(on)
	ratio := bOff.Seconds() / bOn.Seconds()
	fmt.Printf("capture: %d MiB of real claude-code lines (%s)\n", size>>20, captures)
	fmt.Printf("translate, export off: %.1f MB/s (best of %d: %v)\n", mbps(bOff), rounds, bOff.Round(time.Millisecond))
	fmt.Printf("translate, export on:  %.1f MB/s (best of %d: %v)\n", mbps(bOn), rounds, bOn.Round(time.Millisecond))
	fmt.Printf("ratio: %.3f of the throughput without export (target >= %.2f)\n", ratio, minRatio)

	failed := check && ratio < minRatio
	for _, gone := range []struct{ name, url string }{
		{"down (refused)", "http://" + closedAddr()},
		{"black-holed", hole.URL()},
	} {
		d, end, stderr, err := replay(agentrun, capture, gone.url)
		if err != nil {
			return err
		}
		if end != offEnd {
			return fmt.Errorf("collector %s changed the end:\n without %s\n with    %s", gone.name, offEnd, end)
		}
		warnings := strings.Count(stderr, "[agentrun] telemetry:")
		extra := d - bOff
		fmt.Printf("collector %s: %v, %+.2fs against the replay without export; %d warning line; same end\n",
			gone.name, d.Round(time.Millisecond), extra.Seconds(), warnings)
		if check && (warnings != 1 || extra > telemetry.FlushTimeout+time.Second) {
			failed = true
		}
	}
	if failed {
		return fmt.Errorf("below target")
	}
	return nil
}

// replay runs agentrun translate of the capture, exporting to endpoint
// ("" for none), and returns its duration, its end event without the
// times, and its stderr.
func replay(agentrun, capture, endpoint string) (time.Duration, string, string, error) {
	in, err := os.Open(capture)
	if err != nil {
		return 0, "", "", err
	}
	defer in.Close()
	args := []string{"translate", "--runtime", "claude-code"}
	if endpoint != "" {
		args = append(args, "--otlp-endpoint", endpoint)
	}
	cmd := exec.Command(agentrun, args...)
	// Nothing of the caller's OTEL_* environment: the flag alone decides.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	var out, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, &out, &stderr
	start := time.Now()
	err = cmd.Run()
	d := time.Since(start)
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return 0, "", "", err
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	e, derr := events.Decode(lines[len(lines)-1])
	end, ok := e.(*events.End)
	if derr != nil || !ok {
		return 0, "", "", fmt.Errorf("no end event: %v\n%s", derr, stderr.String())
	}
	end.Time, end.DurationMs = "", 0
	var b bytes.Buffer
	if err := events.NewWriter(&b).Write(end); err != nil {
		return 0, "", "", err
	}
	return d, strings.TrimSpace(b.String()), stderr.String(), nil
}

// buildCapture concatenates the captures, renaming their call and message
// ids per copy so that every tool call and model call is distinct, until
// size bytes.
func buildCapture(dir, path string, size int64) (int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no captures in %s", dir)
	}
	sort.Strings(files)
	var block []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		block = append(block, bytes.TrimRight(b, "\n")...)
		block = append(block, '\n')
	}
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	var n int64
	for copyN := 0; n < size; copyN++ {
		tag := fmt.Sprintf("_c%d_", copyN)
		b := bytes.ReplaceAll(block, []byte("toolu_mock_"), []byte("toolu_mock"+tag))
		b = bytes.ReplaceAll(b, []byte("msg_mock_"), []byte("msg_mock"+tag))
		w, err := out.Write(b)
		if err != nil {
			return 0, err
		}
		n += int64(w)
	}
	return n, out.Close()
}

func closedAddr() string {
	c, err := telemetrytest.NewBlackHole()
	if err != nil {
		return "127.0.0.1:1"
	}
	addr := strings.TrimPrefix(c.URL(), "http://")
	c.Close()
	return addr
}
