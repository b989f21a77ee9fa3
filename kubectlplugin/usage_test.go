package kubectlplugin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

func counts(in, out, cr, cw int64, cost string) v1alpha1.TokenCounts {
	return v1alpha1.TokenCounts{InputTokens: i64(in), OutputTokens: i64(out), CacheReadTokens: i64(cr), CacheWriteTokens: i64(cw), CostUSD: cost}
}

// usageRuns: two claude-code runs (one with two models, one still
// running), a codex run without cost, and a pi run whose byModel was cut.
func usageRuns() []v1alpha1.AgentRun {
	mk := func(ns, name string, rt v1alpha1.Runtime, phase v1alpha1.Phase, u *v1alpha1.Usage) v1alpha1.AgentRun {
		return v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: ago(time.Hour)},
			Spec: v1alpha1.AgentRunSpec{Runtime: rt}, Status: v1alpha1.AgentRunStatus{Phase: phase, Usage: u}}
	}
	return []v1alpha1.AgentRun{
		mk("team-a", "cc-1", v1alpha1.RuntimeClaudeCode, v1alpha1.PhaseSucceeded, &v1alpha1.Usage{
			TokenCounts: counts(100, 50, 1000, 300, "0.0437"),
			ByModel: map[string]v1alpha1.TokenCounts{
				"claude-sonnet-4-5": counts(80, 40, 900, 300, "0.04"),
				"claude-haiku-4-5":  counts(20, 10, 100, 0, "0.0037"),
			}}),
		mk("team-a", "cc-2", v1alpha1.RuntimeClaudeCode, v1alpha1.PhaseRunning, &v1alpha1.Usage{
			TokenCounts: counts(10, 5, 0, 0, "0.0015375000000000002"),
			ByModel:     map[string]v1alpha1.TokenCounts{"claude-sonnet-4-5": counts(10, 5, 0, 0, "0.0015375000000000002")}}),
		mk("team-b", "codex-1", v1alpha1.RuntimeCodex, v1alpha1.PhaseFailed, &v1alpha1.Usage{
			TokenCounts: v1alpha1.TokenCounts{InputTokens: i64(7000), OutputTokens: i64(700)},
			ByModel:     map[string]v1alpha1.TokenCounts{"gpt-5": {InputTokens: i64(7000), OutputTokens: i64(700)}}}),
		mk("team-b", "pi-1", v1alpha1.RuntimePi, v1alpha1.PhaseSucceeded, &v1alpha1.Usage{
			TokenCounts:      counts(500, 100, 0, 0, "0.5"),
			ByModel:          map[string]v1alpha1.TokenCounts{"big-model": counts(400, 90, 0, 0, "0.45")},
			ByModelTruncated: true}),
		mk("team-b", "pending", v1alpha1.RuntimePi, v1alpha1.PhasePending, nil),
	}
}

// TestPrintUsage: the three groupings of the same runs; the rows always
// add up to the total, which counts each run once.
func TestPrintUsage(t *testing.T) {
	for _, c := range []struct {
		by, want string
	}{
		{byNamespace, `
NAMESPACE   RUNS   INPUT   OUTPUT   CACHE READ   CACHE WRITE   TOTAL   COST
team-a      2      110     55       1000         300           1465    $0.0452
team-b      3      7500    800      0            0             8300    $0.5000
TOTAL       5      7610    855      1000         300           9765    $0.5452
2 runs are still in progress: the usage so far is counted.
1 run reported tokens but no cost (codex reports none): COST sums the others.
`},
		{byRuntime, `
RUNTIME       RUNS   INPUT   OUTPUT   CACHE READ   CACHE WRITE   TOTAL   COST
claude-code   2      110     55       1000         300           1465    $0.0452
codex         1      7000    700      0            0             7700    -
pi            2      500     100      0            0             600     $0.5000
TOTAL         5      7610    855      1000         300           9765    $0.5452
2 runs are still in progress: the usage so far is counted.
1 run reported tokens but no cost (codex reports none): COST sums the others.
`},
		{byModel, `
MODEL               RUNS   INPUT   OUTPUT   CACHE READ   CACHE WRITE   TOTAL   COST
big-model           1      400     90       0            0             490     $0.4500
claude-haiku-4-5    1      20      10       100          0             130     $0.0037
claude-sonnet-4-5   2      90      45       900          300           1335    $0.0415
gpt-5               1      7000    700      0            0             7700    -
(other models)      1      100     10       0            0             110     $0.0500
TOTAL               5      7610    855      1000         300           9765    $0.5452
2 runs are still in progress: the usage so far is counted.
1 run reported tokens but no cost (codex reports none): COST sums the others.
A run that used several models counts in the RUNS of each.
(other models): tokens of runs whose status keeps only their largest models (usage.byModelTruncated).
`},
	} {
		t.Run(c.by, func(t *testing.T) {
			var b bytes.Buffer
			if err := printUsage(&b, sumUsage(usageRuns(), c.by)); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), strings.TrimPrefix(c.want, "\n"); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestParseSince(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"30m", 30 * time.Minute, false},
		{"24h", 24 * time.Hour, false},
		{"7d", 7 * 24 * time.Hour, false},
		{"1d12h", 36 * time.Hour, false},
		{"0d", 0, true},
		{"0s", 0, true},
		{"", 0, true},
		{"d", 0, true},
		{"-1d", 0, true},
		{"-5m", 0, true},
		{"1w", 0, true},
		{"1d2d", 0, true},
	} {
		got, err := parseSince(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseSince(%q) = %s, %v; want %s, error %t", c.in, got, err, c.want, c.err)
		}
	}
}

// TestEndedSince: ended runs by completion time (creation time without
// one), runs in progress always.
func TestEndedSince(t *testing.T) {
	mk := func(name string, phase v1alpha1.Phase, created time.Duration, completed *time.Duration) v1alpha1.AgentRun {
		r := v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created)}, Status: v1alpha1.AgentRunStatus{Phase: phase}}
		if completed != nil {
			r.Status.CompletionTime = mtime(now.Add(-*completed))
		}
		return r
	}
	d := func(d time.Duration) *time.Duration { return &d }
	runs := []v1alpha1.AgentRun{
		mk("old-ended-recently", v1alpha1.PhaseSucceeded, 48*time.Hour, d(30*time.Minute)),
		mk("ended-long-ago", v1alpha1.PhaseFailed, 48*time.Hour, d(25*time.Hour)),
		mk("ended-at-cutoff", v1alpha1.PhaseSucceeded, 30*time.Hour, d(24*time.Hour)),
		mk("no-completion-recent", v1alpha1.PhaseFailed, time.Hour, nil),
		mk("no-completion-old", v1alpha1.PhaseFailed, 30*time.Hour, nil),
		mk("running-for-days", v1alpha1.PhaseRunning, 72*time.Hour, nil),
		mk("queued", v1alpha1.PhaseQueued, 72*time.Hour, nil),
	}
	var got []string
	for _, r := range endedSince(runs, now.Add(-24*time.Hour)) {
		got = append(got, r.Name)
	}
	want := "old-ended-recently ended-at-cutoff no-completion-recent running-for-days queued"
	if strings.Join(got, " ") != want {
		t.Errorf("kept %v, want %s", got, want)
	}
}
