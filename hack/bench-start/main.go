// Command bench-start measures apply to first model call on a real
// Kubernetes (hack/cluster.sh's, brought up by hack/bench-start.sh): N
// AgentRuns in a row, each broken down into its steps, against the same CLI
// started directly on the node in the same run (the baseline), each time to
// the first request the mock model receives.
//
// The moments come from where they are exact: the bench's own watch of
// Jobs, Pods and AgentRuns (receive times; the objects' own timestamps
// have a second's resolution), containerd's log (the Pod sandbox and each
// container's start), the runner's timing lines (AGENTRUN_TIMING=1:
// started, sandbox, ready, in nanoseconds) and the mock's request log (the
// receive time of every request). Everything runs on one machine, so the
// clocks are one.
//
// Run it through hack/bench-start.sh.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/claudecode"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/runner"
)

var agentRuns = schema.GroupVersionResource{Group: "agentrun.dev", Version: "v1alpha1", Resource: "agentruns"}

// The milestones of one run, in the order they happen; each step of the
// table is the time from the one before.
const (
	mApply     = iota // the bench sends the create
	mJob              // the Job is seen (admission, the controller's reconcile)
	mPod              // the Pod is seen (the Job controller)
	mBound            // the Pod is seen bound to the node (the scheduler)
	mSandbox          // containerd: RunPodSandbox returned (the kubelet, the pause container, CNI)
	mSidecar          // containerd: the events sidecar's StartContainer returned
	mRunner           // the runner's "started" line (the agent container created and started)
	mPrepared         // the runner's "sandbox" line (the request prepared, the credentials set up)
	mReady            // the runner's "ready" line (bubblewrap, the proxy, the CLI exec'd)
	mFirstCall        // the mock received the first request
	nMilestones
)

var steps = [nMilestones]string{
	mJob:       "admission and Job creation",
	mPod:       "Pod creation (Job controller)",
	mBound:     "Pod scheduling",
	mSandbox:   "Pod sandbox (kubelet, pause, CNI)",
	mSidecar:   "events sidecar start",
	mRunner:    "agent container start",
	mPrepared:  "runner start",
	mReady:     "sandbox start",
	mFirstCall: "CLI start to first model request",
}

type result struct {
	at        [nMilestones]time.Time
	succeeded time.Duration // first call to the AgentRun seen Succeeded
	phase     string
}

type bench struct {
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	ns       string
	manifest *unstructured.Unstructured
	requests *requestLog
	ctrdLog  string
	claude   string
	mockURL  string
	key      string
	runLimit time.Duration
	verbose  bool
	mu       sync.Mutex
	seen     map[string]*result // run name -> its moments
	jobToRun map[string]string
	podToRun map[string]string
	terminal map[string]chan struct{}
}

func main() {
	n := flag.Int("n", 10, "runs in a row (and as many of the baseline)")
	manifest := flag.String("manifest", "", "the AgentRun to create (YAML; its name is the prefix of each run's)")
	reqLog := flag.String("requests", "", "the mock model's --request-log file")
	ctrdLog := flag.String("containerd-log", "", "containerd's log of the cluster (empty: no Pod sandbox and sidecar steps)")
	claude := flag.String("claude", "", "the claude CLI for the baseline")
	mockURL := flag.String("mock-url", "http://10.200.0.1:18080", "the mock model's URL as the node reaches it")
	key := flag.String("key", "mock-key", "the key the mock accepts")
	ns := flag.String("namespace", "default", "namespace of the runs")
	target := flag.Duration("target", 3*time.Second, "--check: the median of apply to first model request must not exceed this")
	check := flag.Bool("check", false, "exit 1 when the median of apply to first model request is above -target")
	verbose := flag.Bool("v", false, "print each run's moments")
	flag.Parse()
	if *manifest == "" || *reqLog == "" || *claude == "" {
		fmt.Fprintln(os.Stderr, "bench-start: -manifest, -requests and -claude are required (hack/bench-start.sh sets them)")
		os.Exit(2)
	}
	if err := run(*n, *manifest, *reqLog, *ctrdLog, *claude, *mockURL, *key, *ns, *target, *check, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "bench-start:", err)
		os.Exit(1)
	}
}

func run(n int, manifest, reqLog, ctrdLog, claude, mockURL, key, ns string, target time.Duration, check, verbose bool) error {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	b := &bench{ns: ns, ctrdLog: ctrdLog, claude: claude, mockURL: mockURL, key: key, runLimit: 2 * time.Minute, verbose: verbose,
		seen: map[string]*result{}, jobToRun: map[string]string{}, podToRun: map[string]string{}, terminal: map[string]chan struct{}{}}
	if b.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if b.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	b.manifest = &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &b.manifest.Object); err != nil {
		return fmt.Errorf("%s: %w", manifest, err)
	}
	if b.claude, err = filepath.Abs(claude); err != nil { // the CLI runs in its workspace
		return err
	}
	if b.requests, err = openRequestLog(reqLog); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.watch(ctx); err != nil {
		return err
	}

	var runs []*result
	var base []time.Duration
	for i := 1; i <= n; i++ {
		// The baseline and the run alternate, so both see the same machine.
		d, err := b.baseline(ctx)
		if err != nil {
			return fmt.Errorf("baseline %d: %w", i, err)
		}
		base = append(base, d)
		r, err := b.agentRun(ctx, i)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		runs = append(runs, r)
		fmt.Fprintf(os.Stderr, "bench-start: run %d/%d: apply to first model request %s (baseline %s)\n",
			i, n, ms(r.at[mFirstCall].Sub(r.at[mApply])), ms(d))
	}
	total := report(os.Stdout, runs, base)
	if check && total > target {
		fmt.Printf("FAIL: the median of apply to first model request, %s, is above the target of %s\n", ms(total), ms(target))
		os.Exit(1)
	}
	return nil
}

// report prints the table and returns the median of apply to first model request.
func report(w io.Writer, runs []*result, base []time.Duration) time.Duration {
	fmt.Fprintf(w, "\napply to first model request, %d runs in a row (median, p95 of each step)\n\n", len(runs))
	fmt.Fprintf(w, "| step | median | p95 |\n|---|---:|---:|\n")
	for m := mJob; m < nMilestones; m++ {
		var ds []time.Duration
		for _, r := range runs {
			if d, ok := r.step(m); ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			fmt.Fprintf(w, "| %s | n/a | n/a |\n", steps[m])
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", steps[m], ms(quantile(ds, 0.5)), ms(quantile(ds, 0.95)))
	}
	var totals, succ []time.Duration
	for _, r := range runs {
		totals = append(totals, r.at[mFirstCall].Sub(r.at[mApply]))
		succ = append(succ, r.succeeded)
	}
	t := quantile(totals, 0.5)
	bm := quantile(base, 0.5)
	fmt.Fprintf(w, "| **apply to first model request** | **%s** | **%s** |\n", ms(t), ms(quantile(totals, 0.95)))
	fmt.Fprintf(w, "| baseline: the CLI started on the node | %s | %s |\n", ms(bm), ms(quantile(base, 0.95)))
	fmt.Fprintf(w, "\nratio to the baseline (medians): %.2f; agentrun and Kubernetes add %s\n", float64(t)/float64(bm), ms(t-bm))
	fmt.Fprintf(w, "after the first model request: the AgentRun seen Succeeded %s later (median; the scenario's own run included)\n", ms(quantile(succ, 0.5)))
	return t
}

// step is the time from the milestone before m that was measured to m.
func (r *result) step(m int) (time.Duration, bool) {
	if r.at[m].IsZero() {
		return 0, false
	}
	for k := m - 1; k >= 0; k-- {
		if !r.at[k].IsZero() {
			return r.at[m].Sub(r.at[k]), true
		}
	}
	return 0, false
}

// quantile is the nearest-rank quantile; 0 for no values.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// ---------------------------------------------------------------- the runs

// agentRun creates run i, waits until it ended and the Pod is gone, and
// returns its moments.
func (b *bench) agentRun(ctx context.Context, i int) (*result, error) {
	obj := b.manifest.DeepCopy()
	name := fmt.Sprintf("%s-%d", b.manifest.GetName(), i)
	obj.SetName(name)
	obj.SetNamespace(b.ns)
	env, _, _ := unstructured.NestedSlice(obj.Object, "spec", "env")
	env = append(env, map[string]any{"name": runner.TimingEnv, "value": "1"})
	if err := unstructured.SetNestedSlice(obj.Object, env, "spec", "env"); err != nil {
		return nil, err
	}
	r := &result{}
	done := make(chan struct{})
	b.mu.Lock()
	b.seen[name], b.terminal[name] = r, done
	b.mu.Unlock()
	from := b.requests.mark()
	r.at[mApply] = time.Now()
	if _, err := b.dyn.Resource(agentRuns).Namespace(b.ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	select {
	case <-done:
	case <-time.After(b.runLimit):
		return nil, fmt.Errorf("agentrun/%s did not end within %s", name, b.runLimit)
	}
	b.mu.Lock()
	phase := r.phase
	b.mu.Unlock()
	if phase != "Succeeded" {
		return nil, fmt.Errorf("agentrun/%s ended %s", name, phase)
	}
	call, err := b.requests.first(from, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("agentrun/%s: %w", name, err)
	}
	r.at[mFirstCall] = call
	r.succeeded -= call.Sub(r.at[mApply]) // the watch recorded apply to Succeeded

	pod, err := b.podOf(name)
	if err != nil {
		return nil, err
	}
	// Without these the table shows the steps around them merged.
	if err := b.runnerTimes(ctx, pod, r); err != nil {
		fmt.Fprintf(os.Stderr, "bench-start: agentrun/%s: %v\n", name, err)
	}
	if b.ctrdLog != "" {
		if err := b.containerdTimes(pod, r); err != nil {
			fmt.Fprintf(os.Stderr, "bench-start: agentrun/%s: %v\n", name, err)
		}
	}
	if b.verbose {
		for m := mJob; m < nMilestones; m++ {
			if !r.at[m].IsZero() {
				fmt.Fprintf(os.Stderr, "  %-36s +%s\n", steps[m], ms(r.at[m].Sub(r.at[mApply])))
			}
		}
	}
	// The next run starts on a quiet node: this one's Pod is gone.
	if err := b.dyn.Resource(agentRuns).Namespace(b.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := b.kube.CoreV1().Pods(b.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pod/%s still there a minute after its AgentRun was deleted", pod.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return r, nil
}

func ptr[T any](v T) *T { return &v }

func (b *bench) podOf(run string) (*corev1.Pod, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for pod, r := range b.podToRun {
		if r == run {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: b.ns}}, nil
		}
	}
	return nil, fmt.Errorf("no Pod of agentrun/%s was seen", run)
}

// runnerTimes reads the runner's timing lines from the agent container's log.
func (b *bench) runnerTimes(ctx context.Context, pod *corev1.Pod, r *result) error {
	raw, err := b.kube.CoreV1().Pods(b.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: podcontract.AgentContainer}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the agent container's log: %w", err)
	}
	want := map[string]int{"started": mRunner, "sandbox": mPrepared, "ready": mReady}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "[agentrun]" || f[1] != "timing" {
			continue
		}
		m, ok := want[f[2]]
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f[3])
		if err != nil {
			return fmt.Errorf("timing line %q: %w", line, err)
		}
		r.at[m] = t
		delete(want, f[2])
	}
	if len(want) > 0 {
		return fmt.Errorf("the agent container's log lacks the timing lines %v (a runner image without %s?)", keys(want), runner.TimingEnv)
	}
	return nil
}

func keys(m map[string]int) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// containerd's CRI log lines (logrus text; the quotes inside msg escaped).
var (
	ctrdTime    = regexp.MustCompile(`^time="([^"]+)"`)
	ctrdSandbox = regexp.MustCompile(`RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),.*returns sandbox id \\"([0-9a-f]+)\\"`)
	ctrdCreated = regexp.MustCompile(`CreateContainer within sandbox \\"([0-9a-f]+)\\" for &ContainerMetadata\{Name:([^,]+),.*returns container id \\"([0-9a-f]+)\\"`)
	ctrdStarted = regexp.MustCompile(`StartContainer for \\"([0-9a-f]+)\\" returns successfully`)
)

// containerdTimes finds the Pod sandbox's and the events sidecar's start
// in containerd's log.
func (b *bench) containerdTimes(pod *corev1.Pod, r *result) error {
	f, err := os.Open(b.ctrdLog)
	if err != nil {
		return err
	}
	defer f.Close()
	var sandbox, sidecar string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		tm := ctrdTime.FindStringSubmatch(line)
		if tm == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tm[1])
		if err != nil {
			continue
		}
		if m := ctrdSandbox.FindStringSubmatch(line); m != nil && m[1] == pod.Name {
			sandbox, r.at[mSandbox] = m[2], t
		} else if m := ctrdCreated.FindStringSubmatch(line); m != nil && m[1] == sandbox && sandbox != "" && m[2] == podcontract.EventsContainer {
			sidecar = m[3]
		} else if m := ctrdStarted.FindStringSubmatch(line); m != nil && m[1] == sidecar && sidecar != "" && r.at[mSidecar].IsZero() {
			r.at[mSidecar] = t
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if r.at[mSandbox].IsZero() || r.at[mSidecar].IsZero() {
		return fmt.Errorf("%s: no RunPodSandbox or events StartContainer of pod/%s", b.ctrdLog, pod.Name)
	}
	return nil
}

// baseline starts the claude CLI directly, with a fresh home as the runner
// gives it, against the same mock, and returns the time to its first request.
func (b *bench) baseline(ctx context.Context) (time.Duration, error) {
	home, err := os.MkdirTemp("", "bench-start-home-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(home)
	ws := filepath.Join(home, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return 0, err
	}
	prompt, _, _ := unstructured.NestedString(b.manifest.Object, "spec", "prompt", "text")
	model, _, _ := unstructured.NestedString(b.manifest.Object, "spec", "model")
	// The runner's own command line, environment and stdin for the CLI.
	launch, err := claudecode.New().Launch(adapters.LaunchSpec{Binary: b.claude, Prompt: prompt, Model: model,
		Cwd: ws, StateDir: home})
	if err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, b.runLimit)
	defer cancel()
	cmd := exec.CommandContext(cctx, launch.Argv[0], launch.Argv[1:]...)
	cmd.Dir = ws
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "ANTHROPIC_BASE_URL=" + b.mockURL,
		"ANTHROPIC_API_KEY=" + b.key, "CLAUDE_CODE_MAX_RETRIES=1"}, launch.Env...)
	cmd.Stdin = bytes.NewReader(launch.Stdin)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &out
	from := b.requests.mark()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	call, ferr := b.requests.first(from, b.runLimit)
	werr := cmd.Wait()
	if ferr != nil {
		return 0, fmt.Errorf("%w (claude: %v %s)", ferr, werr, out.String())
	}
	return call.Sub(start), nil
}

// ---------------------------------------------------------------- the watch

func (b *bench) watch(ctx context.Context) error {
	jobs, err := b.kube.BatchV1().Jobs(b.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := b.kube.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	runs, err := b.dyn.Resource(agentRuns).Namespace(b.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	go b.loop(jobs, func(ev watch.Event, at time.Time) {
		j, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		for _, o := range j.OwnerReferences {
			if o.Kind == "AgentRun" {
				b.jobToRun[j.Name] = o.Name
				b.first(o.Name, mJob, at)
			}
		}
	})
	go b.loop(pods, func(ev watch.Event, at time.Time) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return
		}
		run, ok := b.jobToRun[p.Labels["batch.kubernetes.io/job-name"]]
		if !ok {
			return
		}
		b.podToRun[p.Name] = run
		b.first(run, mPod, at)
		if p.Spec.NodeName != "" {
			b.first(run, mBound, at)
		}
	})
	go b.loop(runs, func(ev watch.Event, at time.Time) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return
		}
		r := b.seen[u.GetName()]
		if r == nil || r.phase != "" {
			return
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if phase == "Succeeded" || phase == "Failed" {
			r.phase, r.succeeded = phase, at.Sub(r.at[mApply])
			close(b.terminal[u.GetName()])
		}
	})
	return nil
}

// loop hands each event, with its receive time, to f under b.mu.
func (b *bench) loop(w watch.Interface, f func(watch.Event, time.Time)) {
	for ev := range w.ResultChan() {
		at := time.Now()
		b.mu.Lock()
		f(ev, at)
		b.mu.Unlock()
	}
	fmt.Fprintln(os.Stderr, "bench-start: a watch ended; the rest of the run may lack its moments")
}

// first records milestone m of run at t unless it was seen before.
func (b *bench) first(run string, m int, t time.Time) {
	if r := b.seen[run]; r != nil && r.at[m].IsZero() {
		r.at[m] = t
	}
}

// ---------------------------------------------------------------- the mock's request log

// requestLog follows the mock model's --request-log: one JSON line per
// request with its receive time.
type requestLog struct {
	path string
	mu   sync.Mutex
	off  int64
	seen []time.Time // receive times of the model's API requests, in order
}

func openRequestLog(path string) (*requestLog, error) {
	l := &requestLog{path: path}
	return l, l.read()
}

// mark is the position from which first looks.
func (l *requestLog) mark() int {
	_ = l.read()
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// first waits for the first request after mark and returns its receive time.
func (l *requestLog) first(mark int, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		if err := l.read(); err != nil {
			return time.Time{}, err
		}
		l.mu.Lock()
		if len(l.seen) > mark {
			t := l.seen[mark]
			l.mu.Unlock()
			return t, nil
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			return time.Time{}, errors.New("the mock received no request")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *requestLog) read() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Open(l.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	end := strings.LastIndexByte(string(data), '\n')
	if end < 0 {
		return nil
	}
	l.off += int64(end + 1)
	for _, line := range strings.Split(string(data[:end]), "\n") {
		var req struct {
			Time string `json:"time"`
			Path string `json:"path"`
		}
		if json.Unmarshal([]byte(line), &req) != nil || !strings.HasPrefix(req.Path, "/v1/") {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, req.Time)
		if err != nil {
			return fmt.Errorf("%s: time %q: %w", l.path, req.Time, err)
		}
		l.seen = append(l.seen, t)
	}
	return nil
}
