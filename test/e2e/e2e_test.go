//go:build e2e

// Package e2e runs agentrun's operator on a real single-node Kubernetes
// (hack/cluster.sh): `make test-e2e`, as root. TestMain brings the cluster
// up, imports the runner image built without Docker (hack/cluster-images.sh),
// installs the CRD and starts the manager outside the cluster with the
// kubeconfig (the cluster has no kube-proxy); it takes everything down at
// the end unless AGENTRUN_E2E_KEEP=1.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/mockmodel"
)

// nodeIP is the host's address on the node bridge hack/cluster.sh creates;
// Pods reach the host there.
const nodeIP = "10.200.0.1"

var (
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
	out, err := script("hack/cluster.sh", "up")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cluster up: %v\n", err)
		script("hack/cluster.sh", "down")
		return 1
	}
	kubeconfig = strings.TrimSpace(out)
	if os.Getenv("AGENTRUN_E2E_KEEP") != "1" {
		defer func() {
			if _, err := script("hack/cluster.sh", "down"); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: cluster down: %v\n", err)
			}
		}()
	}
	assets, err := script("hack/envtest-assets.sh")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubectl = filepath.Join(strings.TrimSpace(assets), "kubectl")
	if _, err := script("hack/cluster-images.sh", "import", "runner"); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: images: %v\n", err)
		return 1
	}
	if _, err := kube("apply", "-f", filepath.Join(root, "config/crd/bases")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := kube("wait", "--for=condition=Established", "crd/agentruns.agentrun.dev", "--timeout=60s"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := startManager()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: manager: %v\n", err)
		return 1
	}
	defer stop()
	fmt.Fprintf(os.Stderr, "e2e: cluster, images and manager ready in %s\n", time.Since(start).Round(time.Second))
	return m.Run()
}

// script runs a hack/ script from the repository root; stderr passes through.
func script(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, name), args...)
	cmd.Dir = root
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

func startManager() (func(), error) {
	dir, err := os.MkdirTemp("", "agentrun-e2e-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = root
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0",
		"--runner-image", "agentrun-runner:dev", "--runner-image-pull-policy", "IfNotPresent")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if b, err := os.ReadFile(logf.Name()); err == nil && os.Getenv("AGENTRUN_E2E_MANAGER_LOG") == "1" {
			os.Stderr.Write(b)
		}
		os.RemoveAll(dir)
	}, nil
}

// forward shows the loopback-only mock model to the Pods on the node bridge
// address and returns the port there.
func forward(t *testing.T, target string) int {
	t.Helper()
	ln, err := net.Listen("tcp", nodeIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
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
	return ln.Addr().(*net.TCPAddr).Port
}

// TestClaudeCodeAgentRun is the first scenario: apply → Job → Pod → the real
// claude-code in bubblewrap against the mock model through agentrun's filter
// proxy → the AgentRun's status with the mock's token counts, the CLI's cost
// and the result, Succeeded; the events sidecar's log is the schema-1 stream.
func TestClaudeCodeAgentRun(t *testing.T) {
	srv, err := mockmodel.Start(mockmodel.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := forward(t, strings.TrimPrefix(srv.URL(), "http://"))

	const name = "e2e-claude-code"
	kube("delete", "agentrun", name, "--ignore-not-found", "--wait=true")
	if _, err := kube("create", "secret", "generic", "e2e-keys", "--from-literal=anthropic=mock-key"); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`apiVersion: agentrun.dev/v1alpha1
kind: AgentRun
metadata:
  name: %[1]s
spec:
  runtime: claude-code
  model: sonnet
  prompt:
    text: "Please run the demo. scenario:parallel"
  env:
    - name: ANTHROPIC_BASE_URL
      value: http://mock-model.test:%[2]d
    - name: ANTHROPIC_API_KEY
      valueFrom:
        secretKeyRef: {name: e2e-keys, key: anthropic}
    - name: CLAUDE_CODE_MAX_RETRIES
      value: "1"
  timeout: 5m
  network:
    mode: custom
    addHosts:
      - {name: mock-model.test, ip: "%[3]s"}
    allowHosts:
      - mock-model.test:%[2]d
      - %[3]s:%[2]d
`, name, port, nodeIP)
	if _, err := kubeIn(strings.NewReader(manifest), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := kube("wait", "--for=condition=Succeeded", "agentrun/"+name, "--timeout=300s"); err != nil {
		y, _ := kube("get", "agentrun", name, "-o", "yaml")
		pods, _ := kube("get", "pods", "-o", "wide")
		t.Fatalf("%v\n%s\n%s", err, y, pods)
	}
	t.Logf("Succeeded %s after apply", time.Since(start).Round(100*time.Millisecond))

	out, err := kube("get", "agentrun", name, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var run v1alpha1.AgentRun
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatal(err)
	}
	st := run.Status
	if st.Phase != "Succeeded" || st.EndStatus != "finished" || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Errorf("phase %s endStatus %s exitCode %v detail %q", st.Phase, st.EndStatus, st.ExitCode, st.Detail)
	}
	wantResult := "Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done"
	if st.Result == nil || *st.Result != wantResult {
		t.Errorf("result %v, want %q", st.Result, wantResult)
	}
	if st.JobName == "" || st.PodName == "" {
		t.Fatalf("jobName %q podName %q", st.JobName, st.PodName)
	}
	if _, err := kube("get", "job", st.JobName); err != nil {
		t.Error(err)
	}

	logs, err := kube("logs", st.PodName, "-c", "events")
	if err != nil {
		t.Fatal(err)
	}
	var stream []events.Event
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
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
	t.Logf("events: %s", strings.Join(types, " "))
	if len(types) < 3 || types[0] != "start" || types[len(types)-1] != "end" {
		t.Fatalf("events %v: want start ... end", types)
	}
	for _, err := range mockmodel.VerifyUsage(stream, srv.Ledger(), false) {
		t.Error(err)
	}
	end, ok := stream[len(stream)-1].(*events.End)
	if !ok {
		t.Fatalf("last event %T", stream[len(stream)-1])
	}
	// The status carries the stream's totals (which VerifyUsage tied to
	// the mock's ledger): the mock's token counts and the CLI's own cost.
	u := st.Usage
	if u == nil || u.InputTokens == nil || u.OutputTokens == nil {
		t.Fatalf("status.usage %+v", u)
	}
	if end.Usage.InputTokens == nil || end.Usage.OutputTokens == nil || *u.InputTokens == 0 ||
		*end.Usage.InputTokens != *u.InputTokens || *end.Usage.OutputTokens != *u.OutputTokens {
		t.Errorf("status tokens in %d out %d, end %v %v", *u.InputTokens, *u.OutputTokens, end.Usage.InputTokens, end.Usage.OutputTokens)
	}
	var served int64
	for _, c := range srv.Ledger() {
		served += c.Usage.InputTokens
	}
	if served == 0 {
		t.Error("the mock served no tokens")
	}
	cost, err := strconv.ParseFloat(u.CostUSD, 64)
	if err != nil || end.Usage.CostUSD == nil || cost != *end.Usage.CostUSD || cost <= 0 {
		t.Errorf("status cost %q, the CLI's cost in end %v", u.CostUSD, end.Usage.CostUSD)
	}
	if end.Result == nil || *end.Result != wantResult {
		t.Errorf("end result %v", end.Result)
	}
}
