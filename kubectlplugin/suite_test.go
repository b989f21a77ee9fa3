package kubectlplugin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/internal/testenv"
)

// The envtest tests run the plugin's verbs, from the command line on,
// against a real kube-apiserver and etcd with the CRD installed, through
// a kubeconfig file as kubectl would hand it over. There is no controller
// and no kubelet: the tests write the AgentRuns' status and the Pods'
// container statuses themselves, and serve container logs from fakeLogs.

var (
	testEnv       testenv.Shared
	envCfg        *rest.Config
	kubeconfigDir string
	kubeconfigOne sync.Once
	kubeconfig    string
	kubeconfigErr error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testEnv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if code == 0 {
		// No goroutine of the package's (a controller's, a poller's, a
		// watch's) outlives its tests. No library goroutine needs to be
		// passed over: the managers, caches and clients the tests start
		// stop with them, and envtest's processes are stopped above.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if kubeconfigDir != "" {
		os.RemoveAll(kubeconfigDir)
	}
	os.Exit(code)
}

// apiServer starts the shared envtest API server on first use and returns
// a kubeconfig file for it. Without KUBEBUILDER_ASSETS the test fails, as
// the controller tests do.
func apiServer(t testing.TB) string {
	t.Helper()
	env := testEnv.Get(t)
	envCfg = env.Config
	kubeconfigOne.Do(func() {
		// The plugin gets a kubeconfig file, as from kubectl; an admin
		// user, as the person at the terminal usually is.
		if kubeconfigDir, kubeconfigErr = os.MkdirTemp("", "plugin-kubeconfig-"); kubeconfigErr != nil {
			return
		}
		kubeconfig, kubeconfigErr = env.Kubeconfig(testenv.Admin("plugin-user"), kubeconfigDir)
	})
	if kubeconfigErr != nil {
		t.Fatalf("the plugin's kubeconfig: %v", kubeconfigErr)
	}
	return kubeconfig
}

// cluster is one test's namespace on the shared API server.
type cluster struct {
	t    testing.TB
	ctx  context.Context
	c    client.Client
	ns   string
	logs *fakeLogs
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	apiServer(t)
	c, err := client.New(envCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, ctx: ctx, c: c, ns: ns.Name, logs: newFakeLogs()}
}

// result is what one plugin command line did.
type result struct {
	code           int
	stdout, stderr string
}

// plugin runs a command line of the plugin against the cluster, with the
// kubeconfig flag first, as `kubectl agentrun` passes the user's.
func (cl *cluster) plugin(args ...string) result {
	return <-cl.start(args...).done
}

// background is a plugin command line running while the test plays the
// controller and the kubelet.
type background struct {
	stdout, stderr *syncBuffer
	done           chan result
}

func (cl *cluster) start(args ...string) *background {
	return cl.startCtx(cl.ctx, args...)
}

// startCtx starts a command line whose context the test ends, as Ctrl-C
// ends the plugin's.
func (cl *cluster) startCtx(ctx context.Context, args ...string) *background {
	b := &background{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan result, 1)}
	env := Env{Stdin: strings.NewReader(""), Stdout: b.stdout, Stderr: b.stderr, Poll: 20 * time.Millisecond,
		NewLogSource: func(*rest.Config) (LogSource, error) { return cl.logs, nil }}
	go func() {
		code := env.Main(ctx, append([]string{"--kubeconfig", kubeconfig}, args...))
		b.done <- result{code, b.stdout.String(), b.stderr.String()}
	}()
	return b
}

// wait returns the result once the command has exited.
func (b *background) wait(t testing.TB) result {
	t.Helper()
	select {
	case r := <-b.done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("the command has not exited after 30s; stderr:\n%s", b.stderr.String())
		return result{}
	}
}

// waitStderr waits until the command has written want to stderr.
func (b *background) waitStderr(t testing.TB, want string) {
	t.Helper()
	waitFor(t, "stderr "+strconv.Quote(want), func() bool { return strings.Contains(b.stderr.String(), want) })
}

// waitFor polls cond until it holds, for at most 30 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: still not so after 30s", what)
		}
	}
}

// syncBuffer is a bytes.Buffer the command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run creates an AgentRun and writes its status, as the controller would.
func (cl *cluster) run(name string, labels map[string]string, spec v1alpha1.AgentRunSpec, st v1alpha1.AgentRunStatus) *v1alpha1.AgentRun {
	cl.t.Helper()
	if spec.Prompt.Text == nil && spec.Prompt.ConfigMapKeyRef == nil && spec.Prompt.SecretKeyRef == nil {
		spec.Prompt.Text = strp("Please run the demo.")
	}
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name, Labels: labels}, Spec: spec}
	if err := cl.c.Create(cl.ctx, run); err != nil {
		cl.t.Fatal(err)
	}
	cl.setStatus(run, st)
	return run
}

// setStatus writes a run's status, with the conditions the controller
// writes for its phase and reason (the plugin reads Succeeded's reason).
func (cl *cluster) setStatus(run *v1alpha1.AgentRun, st v1alpha1.AgentRunStatus) {
	cl.t.Helper()
	if err := cl.c.Get(cl.ctx, client.ObjectKeyFromObject(run), run); err != nil {
		cl.t.Fatal(err)
	}
	run.Status = st
	if err := cl.c.Status().Update(cl.ctx, run); err != nil {
		cl.t.Fatal(err)
	}
}

// succeededCondition is the Succeeded condition the controller writes for
// a phase and reason.
func succeededCondition(phase v1alpha1.Phase, reason string) []metav1.Condition {
	status := metav1.ConditionUnknown
	switch phase {
	case v1alpha1.PhaseSucceeded:
		status = metav1.ConditionTrue
	case v1alpha1.PhaseFailed:
		status = metav1.ConditionFalse
	}
	return []metav1.Condition{{Type: v1alpha1.ConditionSucceeded, Status: status, Reason: reason,
		LastTransitionTime: metav1.Now(), Message: ""}}
}

// pod creates the run's Pod, labelled as the controller's Job labels it,
// with the events container (a native sidecar) in the given state.
func (cl *cluster) pod(run *v1alpha1.AgentRun, name string, state corev1.ContainerState) *corev1.Pod {
	cl.t.Helper()
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name, Labels: map[string]string{labelUID: string(run.UID)}},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{Name: eventsContainer, Image: "runner", RestartPolicy: &always}},
			Containers:     []corev1.Container{{Name: "agent", Image: "runner"}},
		},
	}
	if err := cl.c.Create(cl.ctx, pod); err != nil {
		cl.t.Fatal(err)
	}
	cl.podState(pod, state)
	return pod
}

// podState sets the events container's state.
func (cl *cluster) podState(pod *corev1.Pod, state corev1.ContainerState) {
	cl.t.Helper()
	if err := cl.c.Get(cl.ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		cl.t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: eventsContainer, Image: "runner", State: state}}
	if err := cl.c.Status().Update(cl.ctx, pod); err != nil {
		cl.t.Fatal(err)
	}
}

var (
	runningState    = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	terminatedState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	waitingState    = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
)

// fakeLogs serves container logs from memory: envtest has no kubelet.
// A log may be cut: the first followed read ends after cut bytes, as a
// stream that breaks off does, and later reads serve all of it.
type fakeLogs struct {
	mu    sync.Mutex
	logs  map[string]fakeLog
	opens []string // "pod/container follow=BOOL", in order
}

type fakeLog struct {
	data []byte
	cut  int
	err  error
}

func newFakeLogs() *fakeLogs { return &fakeLogs{logs: map[string]fakeLog{}} }

func (f *fakeLogs) set(pod string, l fakeLog) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[pod] = l
}

func (f *fakeLogs) Open(_ context.Context, _, pod, container string, follow bool) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens = append(f.opens, fmt.Sprintf("%s/%s follow=%t", pod, container, follow))
	l, ok := f.logs[pod]
	switch {
	case !ok:
		return nil, fmt.Errorf("no log for pod %s", pod)
	case l.err != nil:
		return nil, l.err
	}
	data := l.data
	if follow && l.cut > 0 {
		data = data[:l.cut]
		l.cut = 0
		f.logs[pod] = l
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (f *fakeLogs) opened() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.opens...)
}

func strp(s string) *string { return &s }
func i64(n int64) *int64    { return &n }
func mtime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}
