package sandbox

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// BenchmarkSandboxStartup is the start-up of `agentrun sandbox -- true`
// against `true`, in the same run, in two workspaces: one in no repository,
// and a synthesized repository of a few thousand files with a submodule.
// agentrun writes its own timeline of each start (internal/phases,
// AGENTRUN_PHASES), so the output breaks the time down by phase; what the
// timeline does not cover is the process's own start and exit (exec, the
// Go runtime, package initialisation before the timeline's package). The
// start-up of bubblewrap alone is measured too: the floor under any
// sandbox.
func BenchmarkSandboxStartup(b *testing.B) {
	cases := []struct {
		name, title, ws string
		as              []string // the command's prefix: who runs agentrun
	}{
		{"bare", "no repository", benchWorkspace(b, false), nil},
		{"repo", "a repository of " + strconv.Itoa(benchRepoFiles) + " files with a submodule", benchWorkspace(b, true), nil},
	}
	if os.Geteuid() == 0 {
		// A Pod's runner is not root: its start has no drop to make.
		ws := benchWorkspace(b, false)
		if err := os.Chown(ws, 65534, 65534); err != nil {
			b.Fatal(err)
		}
		cases = append(cases, struct {
			name, title, ws string
			as              []string
		}{"user", "no repository, as uid 65534", ws, users[1].prefix})
	}
	bwrapArgv := []string{"bwrap", "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"}
	// Each case's starts, with the baselines', are taken in turns, one of
	// each per round: a slow second of the machine (another tenant, a
	// kernel thread) then weighs on every figure alike instead of on the
	// one case whose starts it fell on.
	type run struct {
		argv, env    []string
		prof         string
		trues, boxed []float64
	}
	for i := 0; i < b.N; i++ {
		var bare, bw []float64
		runs := make([]*run, len(cases))
		for k, c := range cases {
			// The case's user's own (uid 65534's for "user"), and no one
			// else's: in a directory others could write, another user of
			// the machine could put a link or a FIFO at the file.
			dir, err := os.MkdirTemp("/var/tmp", "agentrun-bench-phases-")
			if err == nil && c.as != nil {
				err = os.Chown(dir, users[1].uid, users[1].uid)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
			r := &run{prof: filepath.Join(dir, "phases"),
				argv: append(append([]string{}, c.as...), agentrun, "sandbox", "--cwd", c.ws, "--", "true")}
			r.env = append(os.Environ(), "AGENTRUN_PHASES="+r.prof)
			timed(b, r.env, r.argv...) // warm the caches
			os.Remove(r.prof)
			runs[k] = r
		}
		for j := 0; j < startupRounds; j++ {
			bare = append(bare, timed(b, nil, "true"))
			bw = append(bw, timed(b, nil, bwrapArgv...))
			for _, r := range runs {
				r.trues = append(r.trues, timed(b, nil, "true"))
				r.boxed = append(r.boxed, timed(b, r.env, r.argv...))
			}
		}
		b.ReportMetric(median(bare), "true-ms")
		b.ReportMetric(median(bw), "bwrap-true-ms")
		for k, c := range cases {
			r := runs[k]
			names, phases := readPhases(b, r.prof, r.boxed)
			tm, sm := median(r.trues), median(r.boxed)
			b.ReportMetric(tm, c.name+"-true-ms")
			b.ReportMetric(sm, c.name+"-sandbox-true-ms")
			b.ReportMetric(sm-tm, c.name+"-overhead-ms")
			var total float64
			meds := map[string]float64{}
			for _, n := range names {
				meds[n] = median(phases[n])
				total += meds[n]
			}
			var out strings.Builder
			fmt.Fprintf(&out, "start-up in %s: true %.1f ms, agentrun sandbox -- true %.1f ms (+%.1f ms); bubblewrap alone %.1f ms\n", c.title, tm, sm, sm-tm, median(bw))
			fmt.Fprintf(&out, "  %-24s %9s %6s\n", "phase (median of "+strconv.Itoa(startupRounds)+")", "ms", "share")
			for _, n := range names {
				fmt.Fprintf(&out, "  %-24s %9.2f %5.0f%%\n", n, meds[n], 100*meds[n]/total)
			}
			// Printed, not logged: go test cuts a benchmark's log to ten lines.
			fmt.Print(out.String())
		}
	}
}

// startupRounds is how many starts each median is taken of (about 4 s of
// starts in all, as root).
const startupRounds = 41

// benchRepoFiles is the size of the synthesized repository: a checkout of
// an ordinary project (10 directories of 10 of 30 files each).
const benchRepoFiles = 3000

// timed runs argv with env (nil: this process's) and returns how long it
// took, in milliseconds.
func timed(b *testing.B, env []string, argv ...string) float64 {
	b.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = env
	start := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("%v: %v %s", argv, err, out)
	}
	return float64(time.Since(start)) / 1e6
}

// readPhases reads the timelines agentrun wrote (one line per start, in
// the order of walls, each "name=ms ..."): the phases in their order, and
// each phase's duration per start (a phase marked more than once adds
// up). "process" is the rest of each start's wall time: exec, the Go
// runtime and the package initialisation before the timeline began, and
// the exit.
func readPhases(b *testing.B, path string, walls []float64) ([]string, map[string][]float64) {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != len(walls) {
		b.Fatalf("%d timelines for %d starts", len(lines), len(walls))
	}
	names := []string{"process"}
	out := map[string][]float64{}
	for i, line := range lines {
		sum := map[string]float64{}
		var inside float64
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("timeline %q: %v", line, err)
			}
			if _, ok := sum[k]; !ok && !slices.Contains(names, k) {
				names = append(names, k)
			}
			sum[k] += ms
			inside += ms
		}
		sum["process"] = walls[i] - inside
		for _, n := range names {
			out[n] = append(out[n], sum[n])
		}
	}
	return names, out
}

// benchWorkspace makes a workspace outside /tmp: an empty directory, or a
// repository of benchRepoFiles committed files with a submodule checked
// out (git submodule add), as a clone --recurse-submodules leaves it.
func benchWorkspace(b *testing.B, repo bool) string {
	b.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "agentrun-bench-ws-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if !repo {
		return dir
	}
	git := func(dir string, args ...string) {
		b.Helper()
		c := exec.Command("git", append([]string{"-C", dir, "-c", "protocol.file.allow=always"}, args...)...)
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b"}
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	upstream := filepath.Join(dir, "upstream")
	git(dir, "init", "-q", "-b", "main", upstream)
	for i := 0; i < 20; i++ {
		if err := os.WriteFile(filepath.Join(upstream, fmt.Sprintf("lib%d.go", i)), []byte("package lib\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	git(upstream, "add", ".")
	git(upstream, "commit", "-q", "-m", "lib")
	ws := filepath.Join(dir, "ws")
	git(dir, "init", "-q", "-b", "main", ws)
	for i := 0; i < benchRepoFiles; i++ {
		p := filepath.Join(ws, fmt.Sprintf("pkg%d/sub%d/file%d.go", i%10, i/10%10, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("package sub\n\nconst N%d = %d\n", i, i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	git(ws, "add", ".")
	git(ws, "submodule", "add", "-q", upstream, "third_party/lib")
	git(ws, "commit", "-q", "-m", "project")
	return ws
}
