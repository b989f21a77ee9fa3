package controllers

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/internal/testenv"
)

// The controller tests run against a real kube-apiserver and etcd
// (controller-runtime's envtest), started once for the package on first
// use. There is no kubelet, scheduler or Job controller: the tests create
// Pods and set their container statuses themselves, as those would.

var (
	scheme  = runtime.NewScheme()
	logOnce sync.Once
	testEnv testenv.Shared
	envCfg  *rest.Config
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

// priorityQueueShutdownRace is controller-runtime 0.23's priority queue
// handing an item to a worker that the queue's shutdown has just released:
// the send blocks for good (kubernetes-sigs/controller-runtime#3538, fixed
// in 0.25, which needs the Kubernetes 1.37 libraries). It happens only
// when a controller stops, which in the manager is the process's end.
const priorityQueueShutdownRace = "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleReadyItems.func1.1"

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testEnv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if code == 0 {
		// No goroutine of the package's (a controller's, a poller's, a
		// watch's) outlives its tests: the managers, caches and clients
		// the tests start stop with them, and envtest's processes are
		// stopped above. One library goroutine is passed over.
		if err := goleak.Find(goleak.IgnoreTopFunction(priorityQueueShutdownRace)); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// apiServer returns the shared envtest API server, starting it on first use.
// Without KUBEBUILDER_ASSETS the test fails: these tests are part of the
// suite, not optional.
func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	logOnce.Do(func() { logf.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel()))) })
	envCfg = testEnv.Get(t).Config
	return envCfg
}

// kubectl runs kubectl against the shared API server as an administrator.
func kubectl(t *testing.T) testenv.Kubectl {
	t.Helper()
	k, err := testEnv.Get(t).Kubectl(testenv.Admin("kubectl"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// zapLevel is quiet unless AGENTRUN_TEST_LOG is set: the tests provoke
// conflicts and errors on purpose.
func zapLevel() zapcore.Level {
	if os.Getenv("AGENTRUN_TEST_LOG") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.DPanicLevel
}

// harness is one test's namespace, clients and controller.
type harness struct {
	t      *testing.T
	ctx    context.Context
	c      client.Client // uncached, for the test's own reads and writes
	cfg    *rest.Config  // the API server's
	ns     string
	clock  *clocktesting.FakeClock
	logs   *fakeLogs
	graces Graces
	stop   func()
	// The live progress and budgets: the port the Pods' events sidecars
	// serve on (the test serves it), the write intervals, the prices, and
	// the reader of the running manager.
	port      int32
	intervals LiveIntervals
	prices    Prices
	live      *Live
}

// newHarness makes a namespace and starts a controller for it.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessOn(t, apiServer(t))
}

// newHarnessOn is newHarness on another API server than the shared one.
func newHarnessOn(t *testing.T, cfg *rest.Config) *harness {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(name, "-") + "-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, c: c, cfg: cfg, ns: ns.Name, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)),
		logs:   &fakeLogs{logs: map[string]fakeLog{}},
		graces: Graces{Startup: time.Minute, Unschedulable: 5 * time.Minute, Deletion: time.Minute, EventLog: time.Minute, SandboxProfile: time.Minute},
		port:   freeLoopbackPort(t), intervals: LiveIntervals{Usage: time.Nanosecond, Progress: time.Nanosecond}}
	h.start()
	t.Cleanup(func() { h.stopController() })
	return h
}

// start runs a new manager and controller for the harness's namespace.
func (h *harness) start() {
	h.t.Helper()
	cacheOpts := CacheOptions()
	cacheOpts.DefaultNamespaces = map[string]cache.Config{h.ns: {}}
	mgr, err := ctrl.NewManager(h.cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	// A new manager has a new live reader, as a restarted process does.
	h.live = NewLive(64, 2*time.Second)
	r := &AgentRunReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("agentrun-controller"),
		Clock:    h.clock, Logs: h.logs, Graces: h.graces,
		Job:  JobConfig{RunnerImage: "agentrun-runner:test", PullPolicy: corev1.PullNever, ProgressPort: h.port},
		Live: h.live, LiveIntervals: h.intervals, Prices: h.prices,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		h.t.Fatal(err)
	}
	b := &BudgetReconciler{Client: mgr.GetClient(), Clock: h.clock, Live: h.live, Prices: h.prices, Interval: time.Nanosecond}
	if err := b.SetupWithManager(mgr); err != nil {
		h.t.Fatal(err)
	}
	rec := &RecordsReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("agentrun-records"), Clock: h.clock}
	if err := rec.SetupWithManager(mgr); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("manager: %v", err)
		}
	}
}

// stopController stops the manager (a controller restart is stop, then start).
func (h *harness) stopController() {
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// eventually polls cond until it returns "" or the time is up; the
// message says what was still wrong.
func (h *harness) eventually(what string, cond func() string) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if last = cond(); last == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("%s: still not so after 30s: %s", what, last)
}

// consistently checks that cond stays "" for d.
func (h *harness) consistently(what string, d time.Duration, cond func() string) {
	h.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if msg := cond(); msg != "" {
			h.t.Fatalf("%s: %s", what, msg)
		}
	}
}

func (h *harness) get(name string) *v1alpha1.AgentRun {
	h.t.Helper()
	run := &v1alpha1.AgentRun{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, run); err != nil {
		h.t.Fatalf("get AgentRun %s: %v", name, err)
	}
	return run
}

// events are the reasons of the Kubernetes Events on an object, sorted.
func (h *harness) events(name string) []string {
	list := &corev1.EventList{}
	if err := h.c.List(h.ctx, list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == "AgentRun" {
			out = append(out, e.Type+"/"+e.Reason+": "+e.Message)
		}
	}
	sort.Strings(out)
	return out
}

func (h *harness) waitEvent(name, prefix string) string {
	h.t.Helper()
	var found string
	h.eventually("event "+prefix+" on "+name, func() string {
		for _, e := range h.events(name) {
			if strings.HasPrefix(e, prefix) {
				found = e
				return ""
			}
		}
		return fmt.Sprintf("events: %q", h.events(name))
	})
	return found
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// freeLoopbackPort is a TCP port free on the loopback addresses, where the
// tests serve the Pods' live progress (each Pod on an address of its own:
// all of 127/8 is local on Linux).
func freeLoopbackPort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

// fakeLogs is the LogReader of the tests: envtest has no kubelet to serve
// pods/log. It records every read.
type fakeLogs struct {
	mu    sync.Mutex
	logs  map[string]fakeLog
	reads []string
}

type fakeLog struct {
	data []byte
	err  error
}

func (f *fakeLogs) set(ns, pod string, data []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[ns+"/"+pod] = fakeLog{data, err}
}

// setContainer sets the log of one container (set's is every other's).
func (f *fakeLogs) setContainer(ns, pod, container string, data []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[ns+"/"+pod+"/"+container] = fakeLog{data, err}
}

func (f *fakeLogs) TailLog(_ context.Context, ns, pod, container string, lines, limit int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, fmt.Sprintf("%s/%s/%s lines=%d limit=%d", ns, pod, container, lines, limit))
	l, ok := f.logs[ns+"/"+pod+"/"+container]
	if !ok {
		l, ok = f.logs[ns+"/"+pod]
	}
	if !ok {
		return nil, fmt.Errorf("no log for %s/%s", ns, pod)
	}
	if l.err != nil {
		return nil, l.err
	}
	data := l.data
	if int64(len(data)) > limit {
		data = data[:limit]
	}
	return data, nil
}

func (f *fakeLogs) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reads)
}
