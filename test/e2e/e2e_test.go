//go:build e2e

// Package e2e runs agentrun's operator on a real single-node Kubernetes
// (hack/cluster.sh): `make test-e2e`, as root. TestMain brings the cluster
// up and installs the operator with its Helm chart (hack/cluster-install.sh:
// the manager and runner images built without Docker, the manager in the
// cluster); it takes everything down at the end unless AGENTRUN_E2E_KEEP=1.
// Each test starts its own mock model, shown to the Pods on the node bridge.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// nodeIP is the host's address on the node bridge hack/cluster.sh creates;
// Pods reach the host there.
const nodeIP = "10.200.0.1"

// e2eKey is the e2e-keys Secret's value: the key the runs' model calls
// carry (and, with spec.credentials, only the runner holds).
const e2eKey = "sk-e2e-real-key-5f0c2a9e71"

// mockHost is the mock model's name inside the runs (spec.network.addHosts).
const mockHost = "mock-model.test"

var (
	// helmValues is the suite's values file for hack/cluster-install.sh
	// (a test that uninstalls the chart installs it again with them).
	helmValues string
	root       string
	kubectl    string
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root = filepath.Join(wd, "..", "..")
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: the test cluster needs root (kubelet, containerd, mounts)")
		return 1
	}
	start := time.Now()
	out, err := script(nil, "hack/cluster.sh", "up")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cluster up: %v\n", err)
		if _, err := script(nil, "hack/cluster.sh", "down"); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: cluster down: %v\n", err)
		}
		return 1
	}
	kubeconfig = strings.TrimSpace(out)
	if os.Getenv("AGENTRUN_E2E_KEEP") != "1" {
		defer func() {
			if _, err := script(nil, "hack/cluster.sh", "down"); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: cluster down: %v\n", err)
			}
		}()
	}
	assets, err := script(nil, "hack/envtest-assets.sh")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubectl = filepath.Join(strings.TrimSpace(assets), "kubectl")
	// Every run of the suite exports its trace to a real collector on the
	// node bridge (the chart's telemetry.otlp), which TestTelemetry reads.
	values, err := startCollector()
	helmValues = values
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: OpenTelemetry Collector: %v\n", err)
		return 1
	}
	defer collector.Stop()
	if _, err := script([]string{"KUBECONFIG=" + kubeconfig, "HELM_VALUES=" + values}, "hack/cluster-install.sh"); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: install: %v\n", err)
		return 1
	}
	secret := `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "e2e-keys"}, "stringData": {"key": "` + e2eKey + `"}}`
	if _, err := kubeIn(strings.NewReader(secret), "apply", "-f", "-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster, images and operator ready in %s\n", time.Since(start).Round(time.Second))
	code := m.Run()
	if code != 0 {
		// The manager's view of what went wrong.
		logs, _ := kube("-n", "agentrun-system", "logs", "deploy/agentrun-manager", "--tail", "40")
		fmt.Fprintf(os.Stderr, "e2e: manager log (last lines):\n%s\n", logs)
	}
	return code
}

// script runs a hack/ script from the repository root with extra
// environment; stderr passes through.
func script(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, name), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

func kube(args ...string) (string, error) {
	return kubeIn(nil, args...)
}

func kubeIn(stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// startMock starts a mock model for one test and shows it to the Pods on
// the node bridge address; it returns the server and the port there.
func startMock(t *testing.T, opts mockmodel.Options) (*mockmodel.Server, int) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	srv, err := mockmodel.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, forward(t, strings.TrimPrefix(srv.URL(), "http://"))
}

// forward relays the node bridge address to the loopback-only mock model
// and returns the port there.
func forward(t *testing.T, target string) int {
	t.Helper()
	ln, err := net.Listen("tcp", nodeIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	relay(ln, target)
	return ln.Addr().(*net.TCPAddr).Port
}

// relay copies every connection ln accepts to target and back, until ln
// is closed.
func relay(ln net.Listener, target string) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
}

// agentRun is an AgentRun against a test's mock model: the API key comes
// from the e2e-keys Secret, and the run may reach the mock only, by name.
type agentRun struct {
	name, runtime, model, prompt, timeout string
	port                                  int
	keyEnv                                string            // the variable that gets the Secret's key
	env                                   map[string]string // literal variables
	jobTTL                                string            // spec.retention.jobTTLAfterEnd; "" leaves it unset
	// credential passes the key as spec.credentials (to the mock, which
	// speaks plain HTTP, so its host is declared http://) instead of
	// spec.env: the agent gets a stand-in.
	credential bool
	// labels are the AgentRun's own labels (an AgentBudget's selector
	// picks runs by them).
	labels map[string]string
	// annotations are the AgentRun's own annotations.
	annotations map[string]string
	// addHosts and allowHosts are more spec.network entries (NAME=IP,
	// HOST:PORT); spec is more of the spec, as YAML indented two spaces.
	addHosts, allowHosts []string
	spec                 string
	// promptConfigMap, when set, takes the prompt from this ConfigMap's
	// key "prompt" instead of prompt.
	promptConfigMap string
}

func (a agentRun) manifest() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agentrun.dev/v1alpha1
kind: AgentRun
metadata:
  name: %s
`, a.name)
	if len(a.labels) > 0 {
		b.WriteString("  labels:\n")
		for k, v := range a.labels {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	if len(a.annotations) > 0 {
		b.WriteString("  annotations:\n")
		for k, v := range a.annotations {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	prompt := fmt.Sprintf("text: %q", a.prompt)
	if a.promptConfigMap != "" {
		prompt = fmt.Sprintf("configMapKeyRef: {name: %s, key: prompt}", a.promptConfigMap)
	}
	fmt.Fprintf(&b, `spec:
  runtime: %s
  model: %s
  prompt:
    %s
  timeout: %s
`, a.runtime, a.model, prompt, a.timeout)
	if a.credential {
		fmt.Fprintf(&b, `  credentials:
    - name: %s
      valueFrom:
        secretKeyRef: {name: e2e-keys, key: key}
      hosts: [http://%s:%d]
  env:
`, a.keyEnv, mockHost, a.port)
	} else {
		fmt.Fprintf(&b, `  env:
    - name: %s
      valueFrom:
        secretKeyRef: {name: e2e-keys, key: key}
`, a.keyEnv)
	}
	for k, v := range a.env {
		fmt.Fprintf(&b, "    - {name: %s, value: %q}\n", k, v)
	}
	fmt.Fprintf(&b, "  network:\n    mode: Custom\n    addHosts:\n      - {name: %s, ip: %q}\n", mockHost, nodeIP)
	for _, h := range a.addHosts {
		name, ip, _ := strings.Cut(h, "=")
		fmt.Fprintf(&b, "      - {name: %s, ip: %q}\n", name, ip)
	}
	fmt.Fprintf(&b, "    allowHosts:\n      - %s:%d\n      - %s:%d\n", mockHost, a.port, nodeIP, a.port)
	for _, h := range a.allowHosts {
		fmt.Fprintf(&b, "      - %q\n", h)
	}
	b.WriteString(a.spec)
	if a.jobTTL != "" {
		fmt.Fprintf(&b, "  retention:\n    jobTTLAfterEnd: %s\n", a.jobTTL)
	}
	return b.String()
}

// apply creates the run (after deleting one of the same name) and returns
// when it was applied.
func (a agentRun) apply(t *testing.T) time.Time {
	t.Helper()
	if _, err := kube("delete", "agentrun", a.name, "--ignore-not-found", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubeIn(strings.NewReader(a.manifest()), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// waitEnded waits until the run has ended, whatever its outcome (phase
// Succeeded or Failed), and returns it.
func waitEnded(t *testing.T, name string, timeout time.Duration) *v1alpha1.AgentRun {
	t.Helper()
	var run *v1alpha1.AgentRun
	ended := eventually(timeout, func() bool {
		run = getRun(t, name)
		return run.Status.Phase == v1alpha1.PhaseSucceeded || run.Status.Phase == v1alpha1.PhaseFailed
	})
	if !ended {
		y, _ := kube("get", "agentrun", name, "-o", "yaml")
		pods, _ := kube("get", "pods", "-o", "wide")
		t.Fatalf("agentrun/%s has not ended after %s\n%s\n%s", name, timeout, y, pods)
	}
	return run
}

func getRun(t *testing.T, name string) *v1alpha1.AgentRun {
	t.Helper()
	out, err := kube("get", "agentrun", name, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var run v1alpha1.AgentRun
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatal(err)
	}
	return &run
}

// succeeded is the run's Succeeded condition as reason/status.
func succeeded(run *v1alpha1.AgentRun) string {
	for _, c := range run.Status.Conditions {
		if c.Type == v1alpha1.ConditionSucceeded {
			return c.Reason + "/" + string(c.Status)
		}
	}
	return "none"
}

func getPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	out, err := kube("get", "pod", name, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(out), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// containerStatus is the status of the Pod's container (or init
// container) name.
func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// parseStream decodes the events sidecar's log: every line a schema-1 event.
func parseStream(t *testing.T, log string) ([]events.Event, []string) {
	t.Helper()
	var stream []events.Event
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		var head struct {
			Schema int    `json:"schema"`
			Type   string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &head); err != nil || head.Schema != 1 {
			t.Fatalf("events log line is not a schema-1 event: %q (%v)", line, err)
		}
		e, err := events.Decode([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, e)
		types = append(types, head.Type)
	}
	return stream, types
}

// eventLog is `kubectl logs POD -c events`, decoded; it must run from start
// to end.
func eventLog(t *testing.T, pod string) ([]events.Event, *events.End) {
	t.Helper()
	logs, err := kube("logs", pod, "-c", "events")
	if err != nil {
		t.Fatal(err)
	}
	stream, types := parseStream(t, logs)
	t.Logf("events: %s", strings.Join(types, " "))
	if len(types) < 2 || types[0] != "start" || types[len(types)-1] != "end" {
		t.Fatalf("events %v: want start ... end", types)
	}
	return stream, stream[len(stream)-1].(*events.End)
}

// follow streams `kubectl logs -f POD -c events` into a buffer until the
// container ends; wait returns what came.
func follow(t *testing.T, pod string) (wait func(time.Duration) string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "logs", "-f", pod, "-c", "events")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // ended by cancel: the error is the kill's
	t.Cleanup(func() { cancel(); <-done })
	return func(d time.Duration) string {
		select {
		case <-done:
		case <-time.After(d):
			cancel()
			<-done
			t.Errorf("kubectl logs -f did not end within %s", d)
		}
		return out.String()
	}
}

// eventually polls cond every 250 ms until it holds or d has passed.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(250 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
