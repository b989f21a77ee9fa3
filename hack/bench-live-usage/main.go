// Command bench-live-usage measures live usage at scale (not a test): N
// AgentRuns running at once against envtest's kube-apiserver and etcd, the
// manager as its own process, and for each run a Pod whose events sidecar
// is played honestly: the real progress server (package progress) on a
// loopback address of its own (127.0.x.y: all of 127/8 is local on Linux),
// fed the usage lines a runner writes after each model call. It reports:
//
//   - freshness: from the end of a model call (its usage line written) to
//     its usage visible in the AgentRun's status through a watch, p50, p95,
//     p99 and max, and how many calls were never seen;
//   - the manager's API requests per second (its client's own count,
//     rest_client_requests_total) while the runs run idle and while they
//     make model calls, and the difference: what live usage adds; the API
//     server's own count alongside;
//   - the manager's CPU seconds and resident memory.
//
// The kubelet's side is simulated: the bench creates the Jobs' Pods, as
// the Job controller would, and sets their status, as a kubelet would.
// Run it through hack/bench-live-usage.sh, which builds the manager.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/testenv"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

type options struct {
	n                int
	manager          string
	concurrency, qps int
	minCall, maxCall time.Duration
	idle, window     time.Duration
	usageInterval    time.Duration
	maxP95           time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 1000, "AgentRuns running at once")
	flag.StringVar(&o.manager, "manager", "bin/manager", "the manager binary")
	flag.IntVar(&o.concurrency, "max-concurrent-reconciles", 16, "the manager's --max-concurrent-reconciles (the chart's default)")
	flag.IntVar(&o.qps, "kube-api-qps", 0, "the manager's --kube-api-qps (0: its default)")
	flag.DurationVar(&o.minCall, "call-min", 5*time.Second, "shortest time between two model calls of one run")
	flag.DurationVar(&o.maxCall, "call-max", 25*time.Second, "longest time between two model calls of one run")
	flag.DurationVar(&o.idle, "idle", 20*time.Second, "how long the running runs are measured without model calls (the baseline)")
	flag.DurationVar(&o.window, "window", 2*time.Minute, "how long model calls are made and measured")
	flag.DurationVar(&o.usageInterval, "live-usage-interval", 0, "the manager's --live-usage-interval (0: its default)")
	flag.DurationVar(&o.maxP95, "max-p95", 0, "exit 1 when the p95 freshness is above this (0: report only)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-live-usage:", err)
		os.Exit(1)
	}
}

// port is where every simulated sidecar serves, each on its own address.
const port = 18788

func run(o options) error {
	raiseFileLimit()
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

	// The bench's clients stand for the kubelet and many users: not rate
	// limited.
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
	const ns = "bench"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	// The sidecars first: each Pod's address serves its document.
	sidecars := make([]*sidecar, o.n)
	for i := range sidecars {
		if sidecars[i], err = newSidecar(podIP(i)); err != nil {
			return fmt.Errorf("sidecar %d at %s: %w", i, podIP(i), err)
		}
	}
	defer func() {
		for _, s := range sidecars {
			s.close()
		}
	}()

	mgr, err := startManager(env, o)
	if err != nil {
		return err
	}
	defer mgr.stop()

	// N AgentRuns; the manager makes their Jobs.
	t := time.Now()
	template := &v1alpha1.AgentRun{Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode,
		Prompt: v1alpha1.PromptSource{Text: ptr.To("fix the failing test")}}}
	if err := parallel(o.n, 32, func(i int) error {
		r := template.DeepCopy()
		r.Name, r.Namespace = runName(i), ns
		return c.Create(ctx, r)
	}); err != nil {
		return fmt.Errorf("creating AgentRuns: %w", err)
	}
	jobs, err := waitJobs(ctx, c, ns, o.n)
	if err != nil {
		return err
	}
	fmt.Printf("%d AgentRuns created and their Jobs made in %s\n", o.n, time.Since(t).Round(time.Millisecond))

	// The Job controller's and the kubelet's part: a Pod per Job, running
	// at its own address.
	t = time.Now()
	if err := parallel(o.n, 32, func(i int) error {
		pod, err := podFor(ctx, cs, jobs[runName(i)])
		if err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP(i), PodIPs: []corev1.PodIP{{IP: podIP(i)}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.EventsContainer, Image: "agentrun-runner:bench", Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.AgentContainer, Image: "agentrun-runner:bench", Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("starting Pods: %w", err)
	}
	if err := waitRunning(ctx, c, ns, o.n); err != nil {
		return err
	}
	fmt.Printf("%d Pods running and their runs Running in %s\n", o.n, time.Since(t).Round(time.Millisecond))
	// Every sidecar has been read once (the manager's first poll of each).
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		read := 0
		for _, s := range sidecars {
			if s.polled.Load() > 0 {
				read++
			}
		}
		if read == o.n {
			break
		}
		if time.Now().After(end) {
			return fmt.Errorf("only %d of %d sidecars were read by the manager after 2 minutes", read, o.n)
		}
	}

	// The watch that sees the status change, as kubectl get -w would.
	w := newWatcher(o.n)
	wc, err := client.NewWithWatch(fast, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := w.start(ctx, wc, ns); err != nil {
		return err
	}
	defer w.stop()

	// Baseline: the runs run, without model calls, once the manager has
	// written what their start brought (statuses, Events).
	t = time.Now()
	if err := mgr.settle(env, 3*time.Minute); err != nil {
		return err
	}
	fmt.Printf("the manager settled (no request for 3 s) %s later\n", time.Since(t).Round(time.Second))
	m0, err := mgr.sample(env)
	if err != nil {
		return err
	}
	time.Sleep(o.idle)
	m1, err := mgr.sample(env)
	if err != nil {
		return err
	}

	// Model calls: each run ends one every minCall to maxCall.
	callCtx, stopCalls := context.WithTimeout(ctx, o.window)
	var calls atomic.Int64
	var wg sync.WaitGroup
	for i := range o.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			var total int64
			for k := 0; ; k++ {
				d := o.minCall + time.Duration(rng.Int64N(int64(o.maxCall-o.minCall)+1))
				select {
				case <-callCtx.Done():
					return
				case <-time.After(d):
				}
				in, out := 1000+rng.Int64N(20000), 50+rng.Int64N(2000)
				total += in + out
				w.expect(i, total, time.Now())
				sidecars[i].modelCall(k, in, out)
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	stopCalls()
	m2, err := mgr.sample(env)
	if err != nil {
		return err
	}
	// Let the last calls arrive.
	unseen := w.wait(30 * time.Second)

	fresh := w.freshness()
	n := calls.Load()
	fmt.Printf("\nlive usage at %d running runs, a model call every %s-%s per run: %d calls in %s (%.0f/s)\n",
		o.n, o.minCall, o.maxCall, n, o.window, float64(n)/o.window.Seconds())
	if len(fresh) == 0 {
		return errors.New("no model call was seen in status")
	}
	p := func(q float64) time.Duration { return fresh[min(len(fresh)-1, int(q*float64(len(fresh))))] }
	fmt.Printf("freshness (call end -> usage in status, seen through a watch): p50 %s, p95 %s, p99 %s, max %s; %d calls never seen\n",
		p(0.50).Round(time.Millisecond), p(0.95).Round(time.Millisecond), p(0.99).Round(time.Millisecond), fresh[len(fresh)-1].Round(time.Millisecond), unseen)
	idle, busy := m1.since(m0), m2.since(m1)
	fmt.Printf("manager API requests: idle %.1f/s, with model calls %.1f/s (status PATCH %.1f/s): live usage adds %.1f/s, %.2f per model call\n",
		idle.reqPerSec(), busy.reqPerSec(), busy.patchPerSec(), busy.reqPerSec()-idle.reqPerSec(), (busy.reqPerSec()-idle.reqPerSec())*o.window.Seconds()/float64(n))
	fmt.Printf("API server requests (all clients, watches excluded): idle %.1f/s, with model calls %.1f/s\n", idle.serverPerSec(), busy.serverPerSec())
	fmt.Printf("manager CPU: idle %.2f s over %s (%.1f%% of a core), with model calls %.2f s over %s (%.1f%% of a core); RSS %.1f MiB, peak %.1f MiB\n",
		idle.cpu, idle.wall.Round(time.Second), 100*idle.cpu/idle.wall.Seconds(), busy.cpu, busy.wall.Round(time.Second), 100*busy.cpu/busy.wall.Seconds(),
		mib(m2.rss), mib(m2.peak))
	if o.maxP95 > 0 && p(0.95) > o.maxP95 {
		return fmt.Errorf("p95 freshness %s above %s", p(0.95), o.maxP95)
	}
	return nil
}

func runName(i int) string { return fmt.Sprintf("run-%05d", i) }

// podIP is Pod i's loopback address: 127.1.0.1, 127.1.0.2, ...
func podIP(i int) string { return fmt.Sprintf("127.1.%d.%d", (i+1)/250, (i+1)%250+1) }

// sidecar is one Pod's events sidecar: the real tracker and server.
type sidecar struct {
	t      *progress.Tracker
	w      io.Writer
	ln     net.Listener
	cancel context.CancelFunc
	done   chan struct{}
	polled atomic.Int64
	mu     sync.Mutex
}

func newSidecar(ip string) (*sidecar, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	t := progress.NewTracker()
	s := &sidecar{t: t, w: progress.NewLineWriter(t), ln: ln, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	h := progress.Handler(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.polled.Add(1)
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln); close(s.done) }() // ErrServerClosed, from the Close below
	go func() { <-ctx.Done(); srv.Close() }()
	s.line(`{"schema":1,"type":"start","time":"` + events.FormatTime(time.Now()) + `","runtime":"claude-code","sandbox":"bubblewrap","network":{"mode":"full","allow":[],"enforced":true},"deny_read":[],"model":null,"cwd":"/workspace","argv":["claude"],"env":[]}`)
	return s, nil
}

func (s *sidecar) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.w, l+"\n") // a progress.LineWriter never fails
}

// modelCall writes what the runner writes when a call ends: its tool call
// and its usage.
func (s *sidecar) modelCall(k int, in, out int64) {
	now := events.FormatTime(time.Now())
	s.line(fmt.Sprintf(`{"schema":1,"type":"tool_start","time":"%s","id":"t%d","parent":null,"name":"Bash","summary":"Bash: go test ./pkg%d/..."}`, now, k, k))
	s.line(fmt.Sprintf(`{"schema":1,"type":"usage","time":"%s","parent":null,"model":"claude-sonnet-5-5","input_tokens":%d,"output_tokens":%d,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":null,"context_tokens":%d}`, now, in, out, in))
}

func (s *sidecar) close() {
	s.cancel()
	<-s.done
}

// watcher matches status changes to the model calls that made them.
type watcher struct {
	mu      sync.Mutex
	pending [][]expectation
	fresh   []time.Duration
	w       watch.Interface
}

type expectation struct {
	total int64
	at    time.Time
}

func newWatcher(n int) *watcher { return &watcher{pending: make([][]expectation, n)} }

func (w *watcher) expect(i int, total int64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[i] = append(w.pending[i], expectation{total, at})
}

func (w *watcher) start(ctx context.Context, c client.WithWatch, ns string) error {
	list := &v1alpha1.AgentRunList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	wi, err := c.Watch(ctx, &v1alpha1.AgentRunList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return err
	}
	w.w = wi
	go func() {
		for ev := range wi.ResultChan() {
			run, ok := ev.Object.(*v1alpha1.AgentRun)
			if !ok || run.Status.Usage == nil || run.Status.Usage.TotalTokens == nil {
				continue
			}
			seen := time.Now()
			i, err := strconv.Atoi(strings.TrimPrefix(run.Name, "run-"))
			if err != nil {
				continue
			}
			w.seen(i, *run.Status.Usage.TotalTokens, seen)
		}
	}()
	return nil
}

func (w *watcher) seen(i int, total int64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pending[i]
	for len(p) > 0 && p[0].total <= total {
		w.fresh = append(w.fresh, at.Sub(p[0].at))
		p = p[1:]
	}
	w.pending[i] = p
}

// wait gives the calls still pending up to d, and returns how many never
// came.
func (w *watcher) wait(d time.Duration) int {
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		w.mu.Lock()
		n := 0
		for _, p := range w.pending {
			n += len(p)
		}
		w.mu.Unlock()
		if n == 0 || time.Now().After(end) {
			return n
		}
	}
}

func (w *watcher) freshness() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]time.Duration{}, w.fresh...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (w *watcher) stop() { w.w.Stop() }

// podFor creates the Job's Pod as the Job controller would.
func podFor(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) (*corev1.Pod, error) {
	tpl := job.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: job.Name + "-bench", Namespace: job.Namespace, Labels: tpl.Labels, Annotations: tpl.Annotations,
			Finalizers:      tpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: tpl.Spec,
	}
	return cs.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

func waitJobs(ctx context.Context, c client.Client, ns string, n int) (map[string]*batchv1.Job, error) {
	for end := time.Now().Add(10 * time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		list := &batchv1.JobList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		if len(list.Items) == n {
			out := map[string]*batchv1.Job{}
			for i := range list.Items {
				out[list.Items[i].Name] = &list.Items[i]
			}
			return out, nil
		}
	}
	return nil, errors.New("the Jobs were not all made after 10 minutes")
}

func waitRunning(ctx context.Context, c client.Client, ns string, n int) error {
	for end := time.Now().Add(10 * time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		list := &v1alpha1.AgentRunList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		running := 0
		for _, r := range list.Items {
			if r.Status.Phase == v1alpha1.PhaseRunning {
				running++
			}
		}
		if running == n {
			return nil
		}
	}
	return errors.New("the runs were not all Running after 10 minutes")
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

type managerProc struct {
	cmd     *exec.Cmd
	metrics string
	log     *tailWriter
}

// startManager runs the manager binary against envtest as an admin, with
// plain HTTP metrics on loopback (the bench reads its client's request
// count there) and the sidecars' port.
func startManager(env *envtest.Environment, o options) (*managerProc, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-live-usage-")
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
	metricsAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", path, "--metrics-bind-address", metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address", probe, "--runner-image", "agentrun-runner:bench",
		"--max-concurrent-reconciles", strconv.Itoa(o.concurrency), "--live-port", strconv.Itoa(port)}
	if o.qps > 0 {
		args = append(args, "--kube-api-qps", strconv.Itoa(o.qps), "--kube-api-burst", strconv.Itoa(2*o.qps))
	}
	if o.usageInterval > 0 {
		args = append(args, "--live-usage-interval", o.usageInterval.String())
	}
	cmd := exec.Command(o.manager, args...)
	tw := &tailWriter{}
	cmd.Stderr = tw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.manager, err)
	}
	m := &managerProc{cmd: cmd, metrics: "http://" + metricsAddr + "/metrics", log: tw}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Printf("manager: %s %s\n", o.manager, strings.Join(args[2:], " "))
				return m, nil
			}
		}
	}
	m.stop()
	return nil, fmt.Errorf("the manager was not ready within 30s: %s", tw.String())
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

// settle waits until the manager has made no request for 3 s in a row.
func (m *managerProc) settle(env *envtest.Environment, max time.Duration) error {
	var last float64
	quiet := 0
	for end := time.Now().Add(max); time.Now().Before(end); time.Sleep(time.Second) {
		s, err := m.sample(env)
		if err != nil {
			return err
		}
		if s.requests == last {
			quiet++
		} else {
			quiet, last = 0, s.requests
		}
		if quiet >= 3 {
			return nil
		}
	}
	return fmt.Errorf("the manager was still making requests after %s", max)
}

// sample is the manager's and the API server's counters at one moment.
type sample struct {
	at        time.Time
	requests  float64 // the manager's client: every request
	patches   float64 // the manager's client: PATCH
	server    float64 // the API server: every request but watches
	cpu       float64 // the manager's user+system CPU seconds
	rss, peak int64
}

func (m *managerProc) sample(env *envtest.Environment) (sample, error) {
	s := sample{at: time.Now()}
	text, err := get(m.metrics, nil)
	if err != nil {
		return s, fmt.Errorf("manager metrics: %w", err)
	}
	s.requests = sum(text, "rest_client_requests_total", nil)
	s.patches = sum(text, "rest_client_requests_total", func(l string) bool { return strings.Contains(l, `method="PATCH"`) })
	adminCfg := env.Config
	hc, err := rest.HTTPClientFor(adminCfg)
	if err != nil {
		return s, err
	}
	srv, err := get(strings.TrimSuffix(adminCfg.Host, "/")+"/metrics", hc)
	if err != nil {
		return s, fmt.Errorf("API server metrics: %w", err)
	}
	s.server = sum(srv, "apiserver_request_total", func(l string) bool { return !strings.Contains(l, `verb="WATCH"`) })
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
	if err != nil {
		return s, err
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	s.cpu = (utime + stime) / 100 // USER_HZ
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		for key, into := range map[string]*int64{"VmRSS:": &s.rss, "VmHWM:": &s.peak} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				*into = kb << 10
			}
		}
	}
	return s, nil
}

// delta is what happened between two samples.
type delta struct {
	wall                      time.Duration
	requests, patches, server float64
	cpu                       float64
}

func (s sample) since(o sample) delta {
	return delta{wall: s.at.Sub(o.at), requests: s.requests - o.requests, patches: s.patches - o.patches, server: s.server - o.server, cpu: s.cpu - o.cpu}
}

func (d delta) reqPerSec() float64    { return d.requests / d.wall.Seconds() }
func (d delta) patchPerSec() float64  { return d.patches / d.wall.Seconds() }
func (d delta) serverPerSec() float64 { return d.server / d.wall.Seconds() }

func get(url string, hc *http.Client) (string, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// sum adds the samples of a counter in Prometheus's text format, those
// whose line keep passes.
func sum(text, name string, keep func(string) bool) float64 {
	var total float64
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		if keep != nil && !keep(l) {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			v, _ := strconv.ParseFloat(l[i+1:], 64)
			total += v
		}
	}
	return total
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// raiseFileLimit: a thousand sidecars and their connections need more
// descriptors than a shell's usual soft limit.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
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
