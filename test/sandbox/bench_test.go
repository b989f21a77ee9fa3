package sandbox

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The sandbox's cost, measured against the same thing without it in the
// same run (go test -bench . -benchtime 1x ./test/sandbox/, or
// hack/bench-sandbox.sh): throughput of 100 MiB over HTTP and over HTTPS
// (CONNECT) through the filter proxy versus direct on loopback, the median
// latency of small requests, and the start-up of `agentrun sandbox -- true`
// versus `true`. curl measures the transfers itself (speed_download,
// time_total), so process start-up does not blur them.

const bulk = 100 << 20

func benchServers(b *testing.B) (httpAddr, httpsAddr string) {
	payload := make([]byte, bulk)
	_, _ = rand.Read(payload)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			w.Write([]byte("ok"))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		w.Write(payload)
	})
	plain := httptest.NewServer(h)
	tlsSrv := httptest.NewTLSServer(h)
	b.Cleanup(plain.Close)
	b.Cleanup(tlsSrv.Close)
	return plain.Listener.Addr().String(), tlsSrv.Listener.Addr().String()
}

// curlIn runs curl directly or inside the sandbox with a route to
// bench.test, and returns its -w output lines.
func curlIn(b *testing.B, sandboxed bool, port string, args ...string) []string {
	b.Helper()
	argv := append([]string{"curl", "-sS", "-k", "-o", "/dev/null"}, args...)
	if sandboxed {
		argv = append([]string{agentrun, "sandbox", "--cwd", binDir, "--add-host", "bench.test=127.0.0.1",
			"--allow-host", "bench.test:" + port, "--allow-host", "127.0.0.1:" + port, "--"}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		b.Fatalf("%v: %v", argv, err)
	}
	return strings.Fields(string(out))
}

func median(vals []float64) float64 {
	sort.Float64s(vals)
	return vals[len(vals)/2]
}

func floats(ss []string) []float64 {
	var out []float64
	for _, s := range ss {
		v, _ := strconv.ParseFloat(s, 64)
		out = append(out, v)
	}
	return out
}

func BenchmarkSandboxNetwork(b *testing.B) {
	httpAddr, httpsAddr := benchServers(b)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	_, httpsPort, _ := net.SplitHostPort(httpsAddr)
	const rounds = 3
	speed := func(sandboxed bool, scheme, port string) float64 {
		host := "127.0.0.1"
		if sandboxed {
			host = "bench.test"
		}
		var best float64
		for i := 0; i < rounds; i++ {
			v := floats(curlIn(b, sandboxed, port, "-w", "%{speed_download}\n", fmt.Sprintf("%s://%s:%s/bulk", scheme, host, port)))[0]
			if v > best {
				best = v
			}
		}
		return best / (1 << 20)
	}
	latency := func(sandboxed bool) float64 {
		host := "127.0.0.1"
		if sandboxed {
			host = "bench.test"
		}
		args := []string{"-w", "%{time_total}\n"}
		for i := 0; i < 200; i++ {
			// One curl, one kept-alive connection (to the proxy, or to the
			// server), each body to /dev/null.
			args = append(args, "-o", "/dev/null", fmt.Sprintf("http://%s:%s/small", host, httpPort))
		}
		return median(floats(curlIn(b, sandboxed, httpPort, args...))) * 1000
	}
	for i := 0; i < b.N; i++ {
		hd, hs := speed(false, "http", httpPort), speed(true, "http", httpPort)
		sd, ss := speed(false, "https", httpsPort), speed(true, "https", httpsPort)
		ld, ls := latency(false), latency(true)
		b.ReportMetric(hd, "http-direct-MiB/s")
		b.ReportMetric(hs, "http-sandbox-MiB/s")
		b.ReportMetric(hs/hd*100, "http-%-of-direct")
		b.ReportMetric(sd, "https-direct-MiB/s")
		b.ReportMetric(ss, "https-sandbox-MiB/s")
		b.ReportMetric(ss/sd*100, "https-%-of-direct")
		b.ReportMetric(ld, "latency-direct-ms")
		b.ReportMetric(ls, "latency-sandbox-ms")
		b.ReportMetric(ls-ld, "latency-added-ms")
	}
}

func BenchmarkSandboxStartup(b *testing.B) {
	run := func(argv ...string) time.Duration {
		start := time.Now()
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			b.Fatalf("%v: %v", argv, err)
		}
		return time.Since(start)
	}
	for i := 0; i < b.N; i++ {
		var bare, boxed []float64
		for j := 0; j < 21; j++ {
			bare = append(bare, float64(run("true"))/1e6)
			boxed = append(boxed, float64(run(agentrun, "sandbox", "--cwd", binDir, "--", "true"))/1e6)
		}
		b.ReportMetric(median(bare), "true-ms")
		b.ReportMetric(median(boxed), "sandbox-true-ms")
		b.ReportMetric(median(boxed)-median(bare), "overhead-ms")
	}
}
