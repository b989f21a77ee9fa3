// Command scale-bench measures the controller at scale against a real
// kube-apiserver and etcd (envtest): N AgentRuns created at once, and the
// time until all N Jobs exist, compared in the same run with creating N
// Jobs directly with client-go; plus the manager's peak memory (the
// manager runs as its own process, so its VmHWM is its own).
//
// Run it through hack/scale-bench.sh, which builds the manager and finds the
// envtest binaries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/controllers"
	"github.com/agentrun-dev/agentrun/internal/testenv"
)

func main() {
	n := flag.Int("n", 1000, "AgentRuns (and Jobs) to create")
	workers := flag.Int("workers", 16, "concurrent creators, for both the AgentRuns and the direct Jobs")
	manager := flag.String("manager", "bin/manager", "the manager binary")
	concurrency := flag.Int("max-concurrent-reconciles", 16, "the manager's --max-concurrent-reconciles")
	qps := flag.Int("kube-api-qps", 1000, "the manager's --kube-api-qps")
	maxRatio := flag.Float64("max-ratio", 0, "exit 1 when controller time / direct time is above this (0: report only)")
	flag.Parse()
	if err := run(*n, *workers, *manager, *concurrency, *qps, *maxRatio); err != nil {
		fmt.Fprintln(os.Stderr, "scale-bench:", err)
		os.Exit(1)
	}
}

func run(n, workers int, managerBin string, concurrency, qps int, maxRatio float64) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	te, err := testenv.Start(testenv.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if err := te.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	env, cfg := te.Environment, te.Config
	fmt.Printf("envtest started in %s\n", te.Started.Round(time.Millisecond))

	// The bench's own clients are not rate limited: they stand for many
	// users at once.
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 1e6, 1e6
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return err
	}
	c, err := client.New(fast, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, ns := range []string{"warmup", "direct", "bench", "backlog"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	// The direct baseline creates the very Jobs the controller would.
	template := &v1alpha1.AgentRun{Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode,
		Prompt: v1alpha1.PromptSource{Text: ptr.To("fix the failing test")}, Timeout: "1h", Sandbox: v1alpha1.SandboxBubblewrap,
		Network: &v1alpha1.Network{Mode: v1alpha1.NetworkFull}, Subagents: ptr.To(true)}}
	jobCfg := controllers.JobConfig{RunnerImage: "agentrun-runner:bench", PullPolicy: corev1.PullIfNotPresent}
	directJob := func(ns string, i int) *batchv1.Job {
		run := template.DeepCopy()
		run.Name, run.Namespace, run.UID = fmt.Sprintf("run-%05d", i), ns, types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		return controllers.BuildJob(run, jobCfg)
	}
	createJobs := func(ns string, count int) (time.Duration, error) {
		t := time.Now()
		err := parallel(count, workers, func(i int) error {
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, directJob(ns, i), metav1.CreateOptions{})
			return err
		})
		return time.Since(t), err
	}
	if _, err := createJobs("warmup", 100); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	direct, err := createJobs("direct", n)
	if err != nil {
		return fmt.Errorf("direct Jobs: %w", err)
	}
	fmt.Printf("direct: %d Jobs created with client-go (%d workers) in %s (%.0f/s)\n", n, workers, direct.Round(time.Millisecond), float64(n)/direct.Seconds())
	// Clear them so the manager's cache holds only its own.
	for _, ns := range []string{"warmup", "direct"} {
		if err := cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
	}

	createRuns := func(ns string) (time.Duration, error) {
		t := time.Now()
		err := parallel(n, workers, func(i int) error {
			run := template.DeepCopy()
			run.Name, run.Namespace = fmt.Sprintf("run-%05d", i), ns
			return c.Create(ctx, run)
		})
		return time.Since(t), err
	}

	// 1. Live: the manager runs while the AgentRuns are created at once;
	// the clock starts with the first AgentRun.
	mgr, err := startManager(env, managerBin, concurrency, qps)
	if err != nil {
		return err
	}
	jobs, err := watchJobs(ctx, cs, "bench", n)
	if err != nil {
		return err
	}
	t := time.Now()
	runsCreated, err := createRuns("bench")
	if err != nil {
		return fmt.Errorf("creating AgentRuns: %w", err)
	}
	live, err := jobs.wait(t)
	if err != nil {
		return err
	}
	settled, err := waitSettled(ctx, c, "bench", n, t)
	if err != nil {
		return err
	}
	peakLive, err := mgr.peakRSS()
	if err != nil {
		return err
	}
	mgr.stop()
	fmt.Printf("live: %d AgentRuns created in %s; all %d Jobs existed %s after the first AgentRun (%.0f/s); all statuses written after %s; manager peak %.1f MiB\n",
		n, runsCreated.Round(time.Millisecond), n, live.Round(time.Millisecond), float64(n)/live.Seconds(), settled.Round(time.Millisecond), mib(peakLive))

	// 2. Backlog: the AgentRuns exist before the manager starts (it was
	// down, or they were applied at once); the clock starts with the
	// manager process and includes its start and cache sync.
	backlogCreated, err := createRuns("backlog")
	if err != nil {
		return fmt.Errorf("creating AgentRuns: %w", err)
	}
	jobs, err = watchJobs(ctx, cs, "backlog", n)
	if err != nil {
		return err
	}
	t = time.Now()
	mgr, err = startManager(env, managerBin, concurrency, qps)
	if err != nil {
		return err
	}
	defer mgr.stop()
	backlog, err := jobs.wait(t)
	if err != nil {
		return err
	}
	settledBacklog, err := waitSettled(ctx, c, "backlog", n, t)
	if err != nil {
		return err
	}
	peakBacklog, err := mgr.peakRSS()
	if err != nil {
		return err
	}
	firstJob := time.Unix(0, jobs.first.Load()).Sub(t)
	fmt.Printf("backlog: %d AgentRuns created beforehand in %s (no manager running); the manager started and made its first Job in %s; all %d Jobs existed %s after the manager started (%.0f/s); all statuses written after %s; manager peak %.1f MiB (it also holds the %d live runs)\n",
		n, backlogCreated.Round(time.Millisecond), firstJob.Round(time.Millisecond), n, backlog.Round(time.Millisecond), float64(n)/backlog.Seconds(), settledBacklog.Round(time.Millisecond), mib(peakBacklog), n)

	fmt.Printf("ratio to direct (target at most 1.5x): live %.2fx; backlog from the manager's start %.2fx; backlog from its first Job %.2fx; creating the AgentRuns alone %.2fx\n",
		live.Seconds()/direct.Seconds(), backlog.Seconds()/direct.Seconds(), (backlog-firstJob).Seconds()/direct.Seconds(), backlogCreated.Seconds()/direct.Seconds())
	if ratio := live.Seconds() / direct.Seconds(); maxRatio > 0 && ratio > maxRatio {
		return fmt.Errorf("live ratio %.2f above %.2f", ratio, maxRatio)
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// jobWatch counts Jobs as they appear, from a watch opened before the first
// AgentRun.
type jobWatch struct {
	n       int
	created atomic.Int64
	first   atomic.Int64 // unix nanoseconds of the first Job
	all     chan time.Time
	w       watch.Interface
}

func watchJobs(ctx context.Context, cs kubernetes.Interface, ns string, n int) (*jobWatch, error) {
	w, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	j := &jobWatch{n: n, all: make(chan time.Time, 1), w: w}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			c := j.created.Add(1)
			if c == 1 {
				j.first.Store(time.Now().UnixNano())
			}
			if c == int64(n) {
				j.all <- time.Now()
			}
		}
	}()
	return j, nil
}

func (j *jobWatch) wait(since time.Time) (time.Duration, error) {
	defer j.w.Stop()
	select {
	case done := <-j.all:
		return done.Sub(since), nil
	case <-time.After(10 * time.Minute):
		return 0, fmt.Errorf("only %d of %d Jobs after 10 minutes", j.created.Load(), j.n)
	}
}

// parallel runs f(0..n-1) on workers goroutines; the first error wins.
func parallel(n, workers int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func waitSettled(ctx context.Context, c client.Client, ns string, n int, since time.Time) (time.Duration, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		list := &v1alpha1.AgentRunList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		done := 0
		for _, r := range list.Items {
			if r.Status.JobName != "" {
				done++
			}
		}
		if done == n {
			return time.Since(since), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, errors.New("statuses not written after 10 minutes")
}

type managerProc struct {
	cmd *exec.Cmd
}

// startManager runs the manager binary against envtest with an admin
// kubeconfig and waits until it is ready.
func startManager(env *envtest.Environment, bin string, concurrency, qps int) (*managerProc, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "scale-bench-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	probe, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeconfig", path, "--metrics-bind-address", "0",
		"--health-probe-bind-address", probe, "--runner-image", "agentrun-runner:bench",
		"--max-concurrent-reconciles", strconv.Itoa(concurrency),
		"--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(2*qps))
	cmd.Stderr = &tailWriter{}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	m := &managerProc{cmd: cmd}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
	}
	m.stop()
	return nil, fmt.Errorf("the manager was not ready within 30s: %s", cmd.Stderr.(*tailWriter).String())
}

func (m *managerProc) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
}

// peakRSS is the manager process's peak resident set (VmHWM).
func (m *managerProc) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tailWriter keeps the last 4 KiB of the manager's log, for errors.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
