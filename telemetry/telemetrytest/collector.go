package telemetrytest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Collector is a real OpenTelemetry Collector (hack/otel-collector.sh's
// build: the OTLP receiver and the file exporter) listening on 127.0.0.1.
type Collector struct {
	GRPC, HTTP string // host:port of the OTLP receivers
	File       string // what the file exporter writes, one request per line
	cmd        *exec.Cmd
	log        *bytes.Buffer
}

// CollectorBinary is the collector: $AGENTRUN_OTELCOL, else what
// hack/otel-collector.sh builds (once, cached under .cache/). Missing is
// a failure, not a skip.
func CollectorBinary(t testing.TB) string {
	t.Helper()
	bin, err := BuildCollector()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildCollector is CollectorBinary outside a test.
func BuildCollector() (string, error) {
	if p := os.Getenv("AGENTRUN_OTELCOL"); p != "" {
		return p, nil
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command(filepath.Join(root, "hack", "otel-collector.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/otel-collector.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// StartCollector starts a collector for the test and stops it at the end.
func StartCollector(t testing.TB) *Collector {
	t.Helper()
	c, err := Launch(CollectorBinary(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Launch starts the collector bin with its configuration and output in
// dir, listening on free ports of 127.0.0.1, and waits until it listens.
func Launch(bin, dir string) (*Collector, error) {
	grpc, err := freeAddr()
	if err != nil {
		return nil, err
	}
	http, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c := &Collector{GRPC: grpc, HTTP: http, File: filepath.Join(dir, "otlp.jsonl"), log: &bytes.Buffer{}}
	conf := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
    metrics:
      receivers: [otlp]
      exporters: [file]
`, c.GRPC, c.HTTP, c.File)
	path := filepath.Join(dir, "collector.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "--config", path)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	for _, addr := range []string{c.GRPC, c.HTTP} {
		if err := waitListening(addr, 30*time.Second); err != nil {
			c.Stop()
			return nil, fmt.Errorf("the collector does not listen on %s: %v\n%s", addr, err, c.log)
		}
	}
	return c, nil
}

// Stop ends the collector (its file is kept).
func (c *Collector) Stop() {
	if c.cmd.Process != nil && c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
}

// HTTPURL and GRPCURL are the receivers as --otlp-endpoint values.
func (c *Collector) HTTPURL() string { return "http://" + c.HTTP }
func (c *Collector) GRPCURL() string { return "http://" + c.GRPC }

// WaitSpans reads the file until a span of traceID with no parent in the
// trace (the root) is there and no new span came for a moment, or until
// timeout; the collector writes what it received within its flush interval.
func (c *Collector) WaitSpans(t testing.TB, traceID string, timeout time.Duration) ([]Span, []Metric) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := -1
	for {
		spans, metrics, err := ReadCollectorFile(c.File)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		tr := Trace(spans, traceID)
		if hasRoot(tr) && len(tr) == last {
			return tr, metrics
		}
		last = len(tr)
		if time.Now().After(deadline) {
			return tr, metrics
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func hasRoot(spans []Span) bool {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	for _, s := range spans {
		if !ids[s.ParentID] && strings.HasPrefix(s.Name, "invoke_agent") {
			return true
		}
	}
	return false
}

// Pid is the collector's process id.
func (c *Collector) Pid() int { return c.cmd.Process.Pid }

// Log is the collector's own output, for failure messages.
func (c *Collector) Log() string { return c.log.String() }

func freePort(t testing.TB) string {
	t.Helper()
	a, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// freeAddr is a 127.0.0.1 port nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BlackHole is a TCP listener on 127.0.0.1 that accepts connections and
// never answers: a collector that hangs.
type BlackHole struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// StartBlackHole listens until the test ends.
func StartBlackHole(t testing.TB) *BlackHole {
	t.Helper()
	b, err := NewBlackHole()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// NewBlackHole listens until Close.
func NewBlackHole() (*BlackHole, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &BlackHole{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c) // held open, never read
			b.mu.Unlock()
		}
	}()
	return b, nil
}

// Close stops listening and drops the connections held.
func (b *BlackHole) Close() {
	b.l.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}

// Accepted is how many connections the black hole took.
func (b *BlackHole) Accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// URL is the black hole as an --otlp-endpoint.
func (b *BlackHole) URL() string { return "http://" + b.l.Addr().String() }

// ClosedPort is a 127.0.0.1 address where nothing listens: a collector
// that is down (connections refused).
func ClosedPort(t testing.TB) string { return "http://" + freePort(t) }
