package controllers

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

// User stories of the live progress against a real API server. The test
// plays the events sidecar with the real progress server (package
// progress) on a loopback address of its own, fed the lines the runner
// would write, and the kubelet, which gives the Pod that address.

// sidecar is a Pod's events sidecar as the test plays it.
type sidecar struct {
	t       *progress.Tracker
	w       *progress.LineWriter
	ln      net.Listener
	stopped chan struct{}
}

// serveProgress serves a tracker's document on ip at the harness's port.
func (h *harness) serveProgress(ip string) *sidecar {
	h.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(h.port))))
	if err != nil {
		h.t.Fatal(err)
	}
	sc := &sidecar{t: progress.NewTracker(), ln: ln, stopped: make(chan struct{})}
	sc.w = progress.NewLineWriter(sc.t)
	ctx, cancel := context.WithCancel(context.Background())
	// ServeListener's error after cancel is the closed listener's, which the
	// test provoked itself.
	go func() { _ = progress.ServeListener(ctx, ln, sc.t); close(sc.stopped) }()
	h.t.Cleanup(func() { cancel(); <-sc.stopped })
	return sc
}

// line feeds one event line, as the runner writes it to the event file.
func (sc *sidecar) line(s string) { io.WriteString(sc.w, s+"\n") }

func usageLine(model string, in, out int64, cost string) string {
	if cost == "" {
		cost = "null"
	}
	return fmt.Sprintf(`{"schema":1,"type":"usage","time":"%s","parent":null,"model":%q,"input_tokens":%d,"output_tokens":%d,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":%s,"context_tokens":%d}`,
		events.FormatTime(time.Now()), model, in, out, cost, in)
}

func toolStartLine(id, summary string) string {
	return fmt.Sprintf(`{"schema":1,"type":"tool_start","time":"%s","id":%q,"parent":null,"name":"Bash","summary":%q}`, events.FormatTime(time.Now()), id, summary)
}

func toolLine(id, summary string, failed bool) string {
	return fmt.Sprintf(`{"schema":1,"type":"tool","time":"%s","id":%q,"parent":null,"name":"Bash","summary":%q,"denied":false,"error":%v}`, events.FormatTime(time.Now()), id, summary, failed)
}

const startLine = `{"schema":1,"type":"start","time":"2026-06-10T15:00:00.000Z","runtime":"claude-code","sandbox":"bubblewrap","network":{"mode":"full","allow":[],"enforced":true},"deny_read":[],"model":null,"cwd":"/workspace","argv":["claude"],"env":[]}`

// runningAt plays the kubelet: the Pod runs, at ip.
func runningAt(at time.Time, ip string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		running(at)(s)
		s.PodIP, s.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
}

// liveRun starts a run whose Pod runs at ip with the sidecar serving.
func (h *harness) liveRun(name, ip string, edit func(*v1alpha1.AgentRunSpec)) (*corev1.Pod, *sidecar) {
	h.t.Helper()
	sc := h.serveProgress(ip)
	sc.line(startLine)
	h.createRun(name, edit)
	pod := h.startPod(h.job(name))
	h.setStatus(pod, runningAt(h.clock.Now(), ip))
	h.phaseIs(name, v1alpha1.PhaseRunning)
	return pod, sc
}

// usageIs waits until the run's status shows total tokens.
func (h *harness) usageIs(name string, total int64) *v1alpha1.AgentRun {
	h.t.Helper()
	var run *v1alpha1.AgentRun
	h.eventually(fmt.Sprintf("%s's status usage at %d tokens", name, total), func() string {
		run = h.get(name)
		if u := run.Status.Usage; u == nil || u.TotalTokens == nil || *u.TotalTokens != total {
			return fmt.Sprintf("usage %+v progress %+v", run.Status.Usage, run.Status.Progress)
		}
		return ""
	})
	return run
}

// TestLiveUsageWhileRunning: while the agent works, each model call's usage
// reaches the AgentRun's status (and kubectl get's Tokens column), with the
// counters and the progress; at the end the end's figures replace them.
func TestLiveUsageWhileRunning(t *testing.T) {
	h := newHarness(t)
	pod, sc := h.liveRun("live", "127.0.0.1", nil)
	if pod.Spec.InitContainers[0].Ports[0].ContainerPort != h.port {
		t.Fatalf("the Pod's progress port %+v", pod.Spec.InitContainers[0].Ports)
	}

	sc.line(toolStartLine("t1", "Bash: sleep 40"))
	sc.line(usageLine("claude-sonnet-5-5", 1200, 80, ""))
	run := h.usageIs("live", 1280)
	p := run.Status.Progress
	if p == nil || p.ModelCalls != 1 || p.ToolCalls != 1 || p.Activity != "[main] tool Bash: sleep 40" || p.LastEventTime == nil {
		t.Errorf("progress %+v", p)
	}
	if run.Status.Phase != v1alpha1.PhaseRunning || run.Status.Usage.ByModel["claude-sonnet-5-5"].InputTokens == nil {
		t.Errorf("status %+v", run.Status)
	}
	// kubectl get -w shows it climbing: the Tokens column.
	kubectl := kubectl(t)
	out, _, err := kubectl.Run("get", "-n", h.ns, "ar", "live")
	if err != nil {
		t.Fatal(err)
	}
	if table, _ := io.ReadAll(out); !strings.Contains(string(table), "1280") || !strings.Contains(string(table), "Running") {
		t.Errorf("kubectl get:\n%s", table)
	}

	sc.line(toolLine("t1", "Bash: sleep 40", true))
	sc.line(usageLine("claude-sonnet-5-5", 300, 20, ""))
	run = h.usageIs("live", 1600)
	if c := run.Status.Counters; c == nil || c.Tools != 1 || c.ToolErrors != 1 {
		t.Errorf("counters %+v", c)
	}
	if p := run.Status.Progress; p.ModelCalls != 2 || p.Activity != "[main] tool Bash: sleep 40 (error)" {
		t.Errorf("progress %+v", p)
	}

	// The end: the summary's figures (claude-code's own total, with its
	// helper calls and its cost) replace the live ones.
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(anEnd("done")), true))
	run = h.phaseIs("live", v1alpha1.PhaseSucceeded)
	if u := run.Status.Usage; *u.TotalTokens != 18234+912+42000+5100 || u.CostUSD != "0.0436916" || u.CostEstimated {
		t.Errorf("the end's usage did not replace the live one: %+v", u)
	}
	if *run.Status.Counters != (v1alpha1.Counters{Tools: 7, ToolErrors: 1, Denials: 2, Subagents: 1, DeniedConnections: 3}) {
		t.Errorf("counters %+v", run.Status.Counters)
	}
	if run.Status.Progress == nil || run.Status.Progress.ModelCalls != 2 {
		t.Errorf("the progress is not kept after the end: %+v", run.Status.Progress)
	}
	h.eventually("the ended run's Pod is no longer read", func() string {
		if n := h.live.Watching(); n != 0 {
			return fmt.Sprintf("%d runs polled", n)
		}
		return ""
	})
}

// TestLiveWritesAreRateLimited: a run's new usage is written at most once
// per usage interval; the last one comes when the interval is over.
func TestLiveWritesAreRateLimited(t *testing.T) {
	h := newHarness(t)
	h.stopController()
	h.intervals = LiveIntervals{Usage: 3 * time.Second, Progress: time.Minute}
	h.start()
	_, sc := h.liveRun("slow", "127.0.0.1", nil)
	sc.line(usageLine("m", 100, 0, ""))
	h.usageIs("slow", 100)
	first := time.Now()
	sc.line(usageLine("m", 10, 0, ""))
	sc.line(usageLine("m", 10, 0, ""))
	h.consistently("no second write within the interval", time.Second, func() string {
		if u := h.get("slow").Status.Usage; *u.TotalTokens != 100 {
			return fmt.Sprintf("written after %s: %d tokens", time.Since(first), *u.TotalTokens)
		}
		return ""
	})
	h.usageIs("slow", 120)
	if took := time.Since(first); took < 2*time.Second {
		t.Errorf("the next usage was written %s after the last, within the 3s interval", took)
	}
}

// TestLiveDocumentIsUntrusted: a Pod that serves something else than a
// valid document changes nothing in status; the run goes on to its end.
func TestLiveDocumentIsUntrusted(t *testing.T) {
	h := newHarness(t)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.9", strconv.Itoa(int(h.port))))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	forged := `{"v":1,"boot":"x","version":1,"usage":{"input_tokens":-5000,"by_model":{}},"counters":{},"model_calls":1,"tool_calls":0,"activity":"","ended":false}`
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(forged), forged)
			c.Close()
		}
	}()
	h.createRun("forged", nil)
	pod := h.startPod(h.job("forged"))
	h.setStatus(pod, runningAt(h.clock.Now(), "127.0.0.9"))
	h.phaseIs("forged", v1alpha1.PhaseRunning)
	h.consistently("a forged document stays out of status", 2*time.Second, func() string {
		if u := h.get("forged").Status.Usage; u != nil {
			return fmt.Sprintf("usage %+v", u)
		}
		return ""
	})
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(anEnd("done")), true))
	h.phaseIs("forged", v1alpha1.PhaseSucceeded)
}

// TestSpendMetricsCountEveryRun: tokens and cost are counted by namespace,
// runtime and model as they reach status, once: a restart of the manager
// counts nothing again, and a run deleted mid-flight is counted up to its
// last live usage.
func TestSpendMetricsCountEveryRun(t *testing.T) {
	h := newHarness(t)
	tokens := func(model string) float64 {
		return testutil.ToFloat64(tokensTotal.WithLabelValues(h.ns, "claude-code", model, "input"))
	}
	_, sc := h.liveRun("counted", "127.0.0.1", nil)
	sc.line(usageLine("claude-sonnet-5-5", 500, 0, ""))
	h.usageIs("counted", 500)
	h.eventually("500 input tokens counted", func() string {
		if n := tokens("claude-sonnet-5-5"); n != 500 {
			return fmt.Sprint(n)
		}
		return ""
	})

	// A restart: the new manager seeds from status and counts only what
	// comes after.
	h.stopController()
	h.start()
	sc.line(usageLine("claude-sonnet-5-5", 100, 0, ""))
	h.usageIs("counted", 600)
	h.eventually("600 input tokens counted, not 1100", func() string {
		if n := tokens("claude-sonnet-5-5"); n != 600 {
			return fmt.Sprint(n)
		}
		return ""
	})

	// Deleted mid-flight: the last live usage is counted, once, even the
	// part no status write carried.
	h.stopController()
	h.intervals = LiveIntervals{Usage: time.Hour, Progress: time.Hour}
	h.start()
	// The new manager takes the document its status already holds as
	// written; the next one waits for the interval.
	h.eventually("the new manager has caught up", func() string {
		doc, w := h.live.latest(h.get("counted").UID)
		if doc == nil || w.cursor != doc.Cursor() {
			return fmt.Sprintf("document %+v, written %+v", doc, w)
		}
		return ""
	})
	sc.line(usageLine("claude-sonnet-5-5", 50, 0, ""))
	h.eventually("the manager has read the last document", func() string {
		run := h.get("counted")
		if doc, _ := h.live.latest(run.UID); doc == nil || doc.ModelCalls != 3 {
			return fmt.Sprintf("document %+v", doc)
		}
		return ""
	})
	if err := h.c.Delete(h.ctx, h.get("counted")); err != nil {
		t.Fatal(err)
	}
	h.eventually("650 input tokens counted", func() string {
		if n := tokens("claude-sonnet-5-5"); n != 650 {
			return fmt.Sprint(n)
		}
		return ""
	})
	h.consistently("counted once", time.Second, func() string {
		if n := tokens("claude-sonnet-5-5"); n != 650 {
			return fmt.Sprint(n)
		}
		return ""
	})
}

// TestRunGauges: the runs in progress by namespace and phase, from the
// manager's cache at scrape time.
func TestRunGauges(t *testing.T) {
	h := newHarness(t)
	h.createRun("queued", func(s *v1alpha1.AgentRunSpec) {
		s.PodOverrides = &v1alpha1.PodOverrides{Labels: map[string]string{KueueQueueLabel: "q"}}
	})
	h.phaseIs("queued", v1alpha1.PhaseQueued)
	h.liveRun("running", "127.0.0.1", nil)
	h.eventually("one run queued and one running in the gauges", func() string {
		q, r := gauge(t, "agentrun_runs", h.ns, "Queued"), gauge(t, "agentrun_runs", h.ns, "Running")
		if q != 1 || r != 1 {
			return fmt.Sprintf("queued %v running %v", q, r)
		}
		return ""
	})
}

// gauge reads a gauge of the manager's registry by its label values.
func gauge(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for i, l := range m.GetLabel() {
				if i >= len(labels) || l.GetValue() != labels[i] {
					continue metric
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
