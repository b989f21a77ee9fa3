package kubectlplugin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

func TestFormatDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0s"},
		{12460 * time.Millisecond, "12.4s"},
		{59999 * time.Millisecond, "59.9s"},
		{time.Minute, "1m00s"},
		{4*time.Minute + 5*time.Second + 900*time.Millisecond, "4m05s"},
		{59*time.Minute + 59*time.Second, "59m59s"},
		{time.Hour, "1h00m"},
		{2*time.Hour + 3*time.Minute + 59*time.Second, "2h03m"},
		{168 * time.Hour, "168h00m"},
	} {
		if got := formatDuration(c.d); got != c.want {
			t.Errorf("formatDuration(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestFirstLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 10, ""},
		{"done", 10, "done"},
		{"\n\n  \nfirst\nsecond", 10, "first"},
		{"  indented\t\tcells  \n", 40, "indented  cells"},
		{"crlf line\r\nnext", 40, "crlf line"},
		{"exactly ten", 11, "exactly ten"},
		{"a longer line than fits", 10, "a longer…"},
		{"一二三四五六七八九十十一", 6, "一二三四五…"},
		{"bell\x07 and esc\x1b[31m", 40, "bell  and esc [31m"},
	} {
		if got := firstLine(c.in, c.max); got != c.want {
			t.Errorf("firstLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestCost(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"0.0437", "$0.0437"},
		{"0.0015375000000000002", "$0.0015"},
		{"0.00005", "$0.0001"}, // half away from zero
		{"12", "$12.0000"},
		{"1e-3", "$0.0010"},
		{"", none},
		{"NaN", none},
	} {
		if got := costCell(&v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{CostUSD: c.in}}); got != c.want {
			t.Errorf("costCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := costCell(nil); got != none {
		t.Errorf("costCell(nil) = %q", got)
	}
}

// now is the tests' clock: every time in the tables is relative to it.
var now = time.Date(2026, 10, 4, 14, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// tableRuns are runs in each state get shows.
func tableRuns() []v1alpha1.AgentRun {
	finished := v1alpha1.AgentRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "claude-code-x7k2p", CreationTimestamp: ago(3 * time.Hour)},
		Spec:       v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode},
		Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, EndStatus: "finished",
			Conditions: succeededCondition(v1alpha1.PhaseSucceeded, "Finished"),
			DurationMs: i64(31250),
			Usage:      &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{CostUSD: "0.0437"}, TotalTokens: i64(66_212)},
			Result:     strp("\nAll tests pass.\nDetails follow."),
		},
	}
	timeout := v1alpha1.AgentRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nightly", CreationTimestamp: ago(26 * time.Hour)},
		Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, EndStatus: "timeout",
			Conditions: succeededCondition(v1alpha1.PhaseFailed, "Timeout"),
			StartTime:  mtime(now.Add(-26 * time.Hour)), CompletionTime: mtime(now.Add(-24 * time.Hour)),
			Detail: "the run exceeded its timeout of 2h\n",
			Usage:  &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{InputTokens: i64(1_200_000), OutputTokens: i64(50_000)}},
		},
	}
	running := v1alpha1.AgentRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "codex-abcde", CreationTimestamp: ago(5 * time.Minute)},
		Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning,
			Conditions: succeededCondition(v1alpha1.PhaseRunning, "Running"),
			StartTime:  mtime(now.Add(-4*time.Minute - 5*time.Second)),
		},
	}
	fresh := v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "pi-new", CreationTimestamp: ago(2 * time.Second)}}
	return []v1alpha1.AgentRun{finished, timeout, running, fresh}
}

// TestPrintRuns: the table of get, in one namespace and across all.
func TestPrintRuns(t *testing.T) {
	for _, c := range []struct {
		name   string
		withNS bool
		want   string
	}{
		{"namespace", false, `
NAME                STATUS      REASON     TOKENS   COST      DURATION   AGE   RESULT
claude-code-x7k2p   Succeeded   Finished   66.2k    $0.0437   31.2s      3h    All tests pass.
nightly             Failed      Timeout    1.2M     -         2h00m      26h   the run exceeded its timeout of 2h
codex-abcde         Running     Running    -        -         4m05s      5m    -
pi-new              -           -          -        -         -          2s    -
`},
		{"all namespaces", true, `
NAMESPACE   NAME                STATUS      REASON     TOKENS   COST      DURATION   AGE   RESULT
team-a      claude-code-x7k2p   Succeeded   Finished   66.2k    $0.0437   31.2s      3h    All tests pass.
team-a      nightly             Failed      Timeout    1.2M     -         2h00m      26h   the run exceeded its timeout of 2h
team-b      codex-abcde         Running     Running    -        -         4m05s      5m    -
team-b      pi-new              -           -          -        -         -          2s    -
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printRuns(&b, tableRuns(), c.withNS, now); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), strings.TrimPrefix(c.want, "\n"); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestTableCellsArePrintable: a result or detail the agent wrote cannot
// act on the terminal or break the table's columns.
func TestTableCellsArePrintable(t *testing.T) {
	var b bytes.Buffer
	if err := writeTable(&b, []string{"NAME", "RESULT"}, [][]string{{"r", "done\x1b]0;pwned\a\tcol\x1b[2J"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "NAME   RESULT\nr      done]0;pwned col[2J\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTotalTokens(t *testing.T) {
	for _, c := range []struct {
		name string
		u    *v1alpha1.Usage
		n    int64
		ok   bool
	}{
		{"no usage", nil, 0, false},
		{"nothing reported", &v1alpha1.Usage{}, 0, false},
		{"total", &v1alpha1.Usage{TotalTokens: i64(7), TokenCounts: v1alpha1.TokenCounts{InputTokens: i64(1)}}, 7, true},
		{"summed when total is missing", &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{
			InputTokens: i64(1), OutputTokens: i64(2), CacheReadTokens: i64(3), CacheWriteTokens: i64(4)}}, 10, true},
		{"zero reported", &v1alpha1.Usage{TokenCounts: v1alpha1.TokenCounts{OutputTokens: i64(0)}}, 0, true},
	} {
		if n, ok := c.u.Tokens(); n != c.n || ok != c.ok {
			t.Errorf("%s: Usage.Tokens = %d, %t; want %d, %t", c.name, n, ok, c.n, c.ok)
		}
	}
}

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		name string
		st   v1alpha1.AgentRunStatus
		want string
	}{
		{"not seen", v1alpha1.AgentRunStatus{}, "not yet seen by the controller"},
		{"running", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, Conditions: succeededCondition(v1alpha1.PhaseRunning, "Running")}, "Running"},
		{"finished", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, Conditions: succeededCondition(v1alpha1.PhaseSucceeded, "Finished")}, "Succeeded (Finished)"},
		{"failed with detail", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, Conditions: succeededCondition(v1alpha1.PhaseFailed, "OOMKilled"),
			Detail: "the agent container was killed:\nout of memory\n"}, "Failed (OOMKilled): the agent container was killed: out of memory"},
		{"the agent's escape sequences are dropped", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, Conditions: succeededCondition(v1alpha1.PhaseFailed, "Failed"),
			Detail: "boom \x1b]52;c;ZWNobyBwd25lZA==\a \x1b[2J\x9b31m"}, "Failed: boom ]52;c;ZWNobyBwd25lZA== [2J31m"},
	} {
		if got := outcome(&v1alpha1.AgentRun{Status: c.st}); got != c.want {
			t.Errorf("%s: outcome = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRunExitCode(t *testing.T) {
	for _, c := range []struct {
		phase     v1alpha1.Phase
		endStatus string
		want      int
	}{
		{v1alpha1.PhaseSucceeded, "finished", 0},
		{v1alpha1.PhaseFailed, "failed", 1},
		{v1alpha1.PhaseFailed, "rejected", 2},
		{v1alpha1.PhaseFailed, "limit", 3},
		{v1alpha1.PhaseFailed, "timeout", 124},
		{v1alpha1.PhaseFailed, "interrupted", 130},
		{v1alpha1.PhaseFailed, "", 1}, // the Pod ended without a summary
	} {
		run := &v1alpha1.AgentRun{Status: v1alpha1.AgentRunStatus{Phase: c.phase, EndStatus: c.endStatus}}
		if got := runExitCode(run); got != c.want {
			t.Errorf("%s/%q: exit %d, want %d", c.phase, c.endStatus, got, c.want)
		}
	}
}

// TestSortRuns: by namespace, then oldest first, then name.
func TestSortRuns(t *testing.T) {
	mk := func(ns, name string, created time.Duration) v1alpha1.AgentRun {
		return v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: ago(created)}}
	}
	runs := []v1alpha1.AgentRun{mk("b", "x", time.Hour), mk("a", "new", time.Minute), mk("a", "z-old", time.Hour),
		mk("a", "same-2", 10*time.Minute), mk("a", "same-1", 10*time.Minute)}
	sortRuns(runs)
	var got []string
	for _, r := range runs {
		got = append(got, r.Namespace+"/"+r.Name)
	}
	if want := "a/z-old a/same-1 a/same-2 a/new b/x"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}
