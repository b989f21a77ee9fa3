package kubectlplugin

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/kubectlplugin/ui/uitest"
)

// BenchmarkUIRunsPage (hack/bench-ui.sh): the runs list of 1,000
// AgentRuns in a real browser. Each round loads the page and reads the
// time from the navigation's start to the list's first full render (the
// page's performance mark runs-rendered: every row in the table). The
// baseline, measured in the same run on the same runs, is `kubectl
// agentrun get` printing them; the server's memory is the Go heap the ui
// holds after a collection, measured in this process, with the 1,000
// runs in its watch. Reported, not asserted.
func BenchmarkUIRunsPage(b *testing.B) {
	const n = 1000
	cl := newCluster(b)
	phases := []v1alpha1.Phase{v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseRunning, v1alpha1.PhaseQueued, v1alpha1.PhasePending}
	for i := range n {
		p := phases[i%len(phases)]
		st := phaseStatus(p, string(p), int64(1000+i*37), fmt.Sprintf("0.%04d", i))
		cl.runIn(cl.ns, fmt.Sprintf("run-%04d", i), map[string]string{"team": fmt.Sprint(i % 7)},
			v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Model: "sonnet"}, st)
	}

	// The baseline: the terminal's table of the same runs.
	start := time.Now()
	if r := cl.plugin("get", "-n", cl.ns); r.code != 0 {
		b.Fatalf("get: %d %s", r.code, r.stderr)
	}
	baseline := time.Since(start)

	ui := cl.startUI()
	ctx := ui.open(b, "/")
	uitest.WaitFor(b, ctx, "the list of 1,000", fmt.Sprintf(`document.body.dataset.rendered === '%d'`, n))

	b.ResetTimer()
	var total float64
	for range b.N {
		uitest.Do(b, ctx, "loading the list", chromedp.Reload())
		uitest.WaitFor(b, ctx, "the list of 1,000", fmt.Sprintf(`performance.getEntriesByName('runs-rendered').length > 0 && document.body.dataset.rendered === '%d'`, n))
		total += uitest.Eval[float64](b, ctx, `performance.getEntriesByName('runs-rendered')[0].startTime`)
	}
	b.StopTimer()
	uitest.Screenshot(b, ctx, "bench-1000")
	// The server's heap: this process's with the ui serving the page,
	// less after the ui has stopped (its watches, caches and streams
	// gone).
	with := heap()
	ui.stop()
	time.Sleep(500 * time.Millisecond)
	held := int64(with) - int64(heap())
	ms := total / float64(b.N)
	b.ReportMetric(ms, "ms-first-render")
	b.ReportMetric(float64(baseline.Milliseconds()), "ms-get-baseline")
	b.ReportMetric(ms/float64(baseline.Milliseconds()), "x-get")
	b.ReportMetric(float64(held)/(1<<20), "MB-server-heap")
}

// heap is the Go heap in use after a collection.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
