package kubectlplugin

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestRun: run creates the AgentRun on a real API server, follows it as
// logs -f does while the test plays the controller and the kubelet, and
// exits with the outcome in its status.
func TestRun(t *testing.T) {
	cl := newCluster(t)
	stream, lines, text := seedStream(t)

	// controller plays the controller for a run the plugin created: the
	// Pod with a running events container, then the end in status.
	controller := func(name, log string, end v1alpha1.AgentRunStatus) *v1alpha1.AgentRun {
		t.Helper()
		run := &v1alpha1.AgentRun{}
		waitFor(t, "agentrun "+name, func() bool {
			return cl.c.Get(cl.ctx, client.ObjectKey{Namespace: cl.ns, Name: name}, run) == nil
		})
		cl.logs.set(name+"-pod", fakeLog{data: []byte(log)})
		pod := cl.pod(run, name+"-pod", runningState)
		cl.setStatus(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, PodName: pod.Name})
		cl.podState(pod, terminatedState)
		end.PodName = pod.Name
		cl.setStatus(run, end)
		return run
	}

	t.Run("finished", func(t *testing.T) {
		bg := cl.start("run", "-n", cl.ns, "--runtime", "claude-code", "--model", "sonnet", "--name", "fix-parse",
			"--timeout", "5m", "--label", "team=parsers", "--allow-host", "mock.test:8080", "--add-host", "mock.test=10.0.0.5",
			"--credential", "ANTHROPIC_API_KEY=agent-keys/anthropic@mock.test:8080", "--env", "ANTHROPIC_BASE_URL=http://mock.test:8080",
			"给 parse 模块补测试并修复失败")
		run := controller("fix-parse", stream, finishedStatus(""))
		r := bg.wait(t)
		if r.code != 0 || r.stdout != text || withoutWaiting(r.stderr) != "agentrun.agentrun.dev/fix-parse created\n" {
			t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
		sp := run.Spec
		if sp.Runtime != "claude-code" || sp.Model != "sonnet" || sp.Timeout != "5m" || *sp.Prompt.Text != "给 parse 模块补测试并修复失败" ||
			run.Labels["team"] != "parsers" || sp.Network.Mode != v1alpha1.NetworkCustom || len(sp.Credentials) != 1 || len(sp.Env) != 1 {
			t.Errorf("the created run: %+v %+v", run.ObjectMeta, sp)
		}
	})

	t.Run("timeout, the log without its end", func(t *testing.T) {
		bg := cl.start("run", "-n", cl.ns, "--runtime", "claude-code", "--name", "slow", "--format", "jsonl", "do everything")
		controller("slow", strings.Join(lines[:4], ""), v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, EndStatus: "timeout",
			Conditions: succeededCondition(v1alpha1.PhaseFailed, "Timeout"), Detail: "the run exceeded its timeout of 1h"})
		r := bg.wait(t)
		if r.code != 124 || r.stdout != strings.Join(lines[:4], "") ||
			withoutWaiting(r.stderr) != "agentrun.agentrun.dev/slow created\nagentrun slow: Failed (Timeout): the run exceeded its timeout of 1h\n" {
			t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
	})

	t.Run("Ctrl-C stops following, not the run", func(t *testing.T) {
		ctx, interrupt := context.WithCancel(cl.ctx)
		defer interrupt()
		bg := cl.startCtx(ctx, "run", "-n", cl.ns, "--runtime", "claude-code", "--name", "left", "go on")
		bg.waitStderr(t, "waiting for the run's Pod")
		interrupt()
		r := bg.wait(t)
		if r.code != exitInterrupted || !strings.Contains(r.stderr, "Stopped following; agentrun left goes on. Follow it again: kubectl agentrun logs -f left") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		if err := cl.c.Get(cl.ctx, client.ObjectKey{Namespace: cl.ns, Name: "left"}, &v1alpha1.AgentRun{}); err != nil {
			t.Errorf("the run: %v", err)
		}
	})

	t.Run("deleted while followed", func(t *testing.T) {
		bg := cl.start("run", "-n", cl.ns, "--runtime", "claude-code", "--name", "doomed", "--format", "jsonl", "x")
		bg.waitStderr(t, "waiting for the run's Pod")
		if err := cl.c.Delete(cl.ctx, &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "doomed"}}); err != nil {
			t.Fatal(err)
		}
		r := bg.wait(t)
		if r.code != exitError || !strings.HasSuffix(r.stderr, "kubectl agentrun run: agentrun \"doomed\" not found in namespace \""+cl.ns+"\"\n") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("detached, generated name", func(t *testing.T) {
		r := cl.plugin("run", "-n", cl.ns, "--runtime", "pi", "--model", "m", "-d", "hello")
		name := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(name, "pi-") || r.stderr != "agentrun.agentrun.dev/"+name+" created\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		run := &v1alpha1.AgentRun{}
		if err := cl.c.Get(cl.ctx, client.ObjectKey{Namespace: cl.ns, Name: name}, run); err != nil || *run.Spec.Prompt.Text != "hello" {
			t.Errorf("%v %+v", err, run.Spec)
		}
	})

	t.Run("server dry run", func(t *testing.T) {
		r := cl.plugin("run", "-n", cl.ns, "--runtime", "codex", "--name", "checked", "--dry-run=server", "hello")
		// The API server's defaults are in; nothing was created.
		if r.code != 0 || !strings.Contains(r.stdout, "  timeout: 1h\n") || !strings.Contains(r.stdout, "  sandbox: Bubblewrap\n") ||
			!strings.Contains(r.stdout, "name: checked\n") || strings.Contains(r.stdout, "managedFields") {
			t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
		}
		if err := cl.c.Get(cl.ctx, client.ObjectKey{Namespace: cl.ns, Name: "checked"}, &v1alpha1.AgentRun{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry run created the run: %v", err)
		}
	})

	t.Run("refused by the API server", func(t *testing.T) {
		// The CRD's own rules answer what the flags do not check.
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--runtime", "claude-code", "--network", "none", "--credential", "K=s/k@h.test:443", "x"}, "spec.credentials needs network access to its hosts"},
			{[]string{"--runtime", "claude-code", "--timeout", "200h", "x"}, "timeout must be between 1s and 168h"},
		} {
			r := cl.plugin(append([]string{"run", "-n", cl.ns, "--dry-run=server"}, c.args...)...)
			if r.code != exitError || r.stdout != "" || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, r.code, r.stdout, r.stderr)
			}
		}
		// dsh is one of the runtimes the server takes.
		if r := cl.plugin("run", "-n", cl.ns, "--dry-run=server", "--runtime", "dsh", "x"); r.code != 0 {
			t.Errorf("--runtime dsh: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// withoutWaiting drops the notes of a follower waiting for the Pod: how
// many there are depends on when the test's controller acts.
func withoutWaiting(stderr string) string {
	var b strings.Builder
	for l := range strings.Lines(stderr) {
		if !strings.HasPrefix(l, "waiting for the ") {
			b.WriteString(l)
		}
	}
	return b.String()
}
