package kubectlplugin

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/controllers"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// TestNamesAgreeWithController: the plugin finds the Pod and its log by
// the controller's names, without importing the controller.
func TestNamesAgreeWithController(t *testing.T) {
	if eventsContainer != podcontract.EventsContainer || labelUID != controllers.LabelUID {
		t.Errorf("plugin: %s %s; controller: %s %s", eventsContainer, labelUID, podcontract.EventsContainer, controllers.LabelUID)
	}
}

// cells splits a table into rows of cells: columns are at least three
// spaces apart, and no test cell holds more than one space in a row.
func cells(table string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{3,}`).Split(strings.TrimRight(line, " "), -1))
	}
	return rows
}

// finishedStatus is the status of a run of the mock's parallel scenario.
func finishedStatus(pod string) v1alpha1.AgentRunStatus {
	return v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, EndStatus: "finished", PodName: pod,
		Conditions: succeededCondition(v1alpha1.PhaseSucceeded, "Finished"), DurationMs: i64(8_400),
		Usage: &v1alpha1.Usage{TokenCounts: counts(21, 45, 1000, 300, "0.0215"), TotalTokens: i64(1366),
			ByModel: map[string]v1alpha1.TokenCounts{"claude-sonnet-4-5": counts(21, 45, 1000, 300, "0.0215")}},
		Result: strp("Both commands finished.\nline 2: ls listed the workspace")}
}

// TestGet: get against a real API server: a namespace, one run, -A with
// a selector, connection flags before the verb, and the errors.
func TestGet(t *testing.T) {
	cl := newCluster(t)
	other := newCluster(t)
	mark := map[string]string{"plugin-test": cl.ns}
	cl.run("done", mark, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, finishedStatus("done-pod"))
	cl.run("timed-out", mark, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeCodex}, v1alpha1.AgentRunStatus{
		Phase: v1alpha1.PhaseFailed, EndStatus: "timeout", Conditions: succeededCondition(v1alpha1.PhaseFailed, "Timeout"),
		DurationMs: i64(300_000), Detail: "the run exceeded its timeout of 5m"})
	cl.run("going", nil, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimePi}, v1alpha1.AgentRunStatus{
		Phase: v1alpha1.PhaseRunning, Conditions: succeededCondition(v1alpha1.PhaseRunning, "Running"),
		StartTime: mtime(time.Now().Add(-90 * time.Second))})
	other.run("elsewhere", mark, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, finishedStatus("p"))

	header := []string{"NAME", "STATUS", "REASON", "TOKENS", "COST", "DURATION", "AGE", "RESULT"}
	done := []string{"done", "Succeeded", "Finished", "1.4k", "$0.0215", "8.4s", "AGE", "Both commands finished."}
	timedOut := []string{"timed-out", "Failed", "Timeout", "-", "-", "5m00s", "AGE", "the run exceeded its timeout of 5m"}
	going := []string{"going", "Running", "Running", "-", "-", "1m3", "AGE", "-"} // 1m30s and on
	for _, c := range []struct {
		name string
		args []string
		want [][]string
	}{
		{"namespace", []string{"get", "-n", cl.ns}, [][]string{header, done, timedOut, going}},
		{"one run", []string{"get", "done", "-n", cl.ns}, [][]string{header, done}},
		{"namespace before the verb", []string{"--namespace", cl.ns, "get", "timed-out"}, [][]string{header, timedOut}},
		{"all namespaces, by label", []string{"get", "-A", "-l", "plugin-test=" + cl.ns}, [][]string{
			append([]string{"NAMESPACE"}, header...),
			append([]string{cl.ns}, done...),
			append([]string{cl.ns}, timedOut...),
			append([]string{other.ns}, "elsewhere", "Succeeded", "Finished", "1.4k", "$0.0215", "8.4s", "AGE", "Both commands finished."),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cl.plugin(c.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			// Rows in any order: runs created in the same second sort by
			// name, and namespace names are generated (TestSortRuns has
			// the order).
			got := cells(r.stdout)
			if len(got) != len(c.want) {
				t.Fatalf("got\n%s", r.stdout)
			}
			byKey := func(rows [][]string) {
				sort.Slice(rows[1:], func(i, j int) bool {
					return strings.Join(rows[1+i][:2], " ") < strings.Join(rows[1+j][:2], " ")
				})
			}
			byKey(got)
			byKey(c.want)
			for i, row := range c.want {
				if len(got[i]) != len(row) {
					t.Fatalf("row %d: %q, want %q", i, got[i], row)
				}
				for j, want := range row {
					switch {
					case want == "AGE" && i > 0:
						if !regexp.MustCompile(`^\d+[sm]$`).MatchString(got[i][j]) {
							t.Errorf("row %d: age %q", i, got[i][j])
						}
					case want == "1m3": // running: the time since the agent started
						if !strings.HasPrefix(got[i][j], want) {
							t.Errorf("row %d: duration %q", i, got[i][j])
						}
					case got[i][j] != want:
						t.Errorf("row %d column %s: %q, want %q", i, c.want[0][j], got[i][j], want)
					}
				}
			}
		})
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"not found", []string{"get", "nope", "-n", cl.ns}, exitError, `agentruns.agentrun.dev "nope" not found`},
		{"empty namespace", []string{"get", "-n", "plugin-empty-ns"}, 0, "No AgentRuns found in plugin-empty-ns namespace."},
		{"bad selector", []string{"get", "-n", cl.ns, "-l", "a b"}, exitError, `-l "a b"`},
		{"no such context", []string{"get", "--context", "nowhere"}, exitNoCluster, `context "nowhere" does not exist`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cl.plugin(c.args...)
			if r.code != c.code || r.stdout != "" || !strings.Contains(r.stderr, c.err) {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q (want %q)", r.code, c.code, r.stdout, r.stderr, c.err)
			}
		})
	}
}

// TestUsage: usage sums runs read from a real API server, across
// namespaces by a selector, and --since leaves out runs that ended
// before.
func TestUsage(t *testing.T) {
	cl := newCluster(t)
	other := newCluster(t)
	mark := map[string]string{"plugin-test": cl.ns}
	cl.run("a", mark, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, finishedStatus("a-pod"))
	old := finishedStatus("b-pod")
	old.CompletionTime = mtime(time.Now().Add(-3 * time.Hour))
	cl.run("b", mark, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, old)
	cl.run("unmarked", nil, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode}, finishedStatus("c-pod"))
	other.run("c", mark, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimePi}, v1alpha1.AgentRunStatus{
		Phase: v1alpha1.PhaseRunning, Conditions: succeededCondition(v1alpha1.PhaseRunning, "Running"),
		Usage: &v1alpha1.Usage{TokenCounts: counts(100, 10, 0, 0, "0.01")}})

	// Namespaces are generated (plugin-xxxxx): the table pads them alike,
	// and sorts them.
	nsRows := []string{fmt.Sprintf("%-14s 2      42      90       2000         600           2732    $0.0430", cl.ns),
		fmt.Sprintf("%-14s 1      100     10       0            0             110     $0.0100", other.ns)}
	sort.Strings(nsRows)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"by namespace", []string{"usage", "-A", "-l", "plugin-test=" + cl.ns, "--by", "namespace"}, fmt.Sprintf(`
NAMESPACE      RUNS   INPUT   OUTPUT   CACHE READ   CACHE WRITE   TOTAL   COST
%s
%s
TOTAL          3      142     100      2000         600           2842    $0.0530
1 run is still in progress: the usage so far is counted.
`, nsRows[0], nsRows[1])},
		{"by model, since", []string{"usage", "-A", "-l", "plugin-test=" + cl.ns, "--since", "1h"}, `
MODEL               RUNS   INPUT   OUTPUT   CACHE READ   CACHE WRITE   TOTAL   COST
claude-sonnet-4-5   1      21      45       1000         300           1366    $0.0215
unknown             1      100     10       0            0             110     $0.0100
TOTAL               2      121     55       1000         300           1476    $0.0315
1 run is still in progress: the usage so far is counted.
`},
		{"one namespace, by runtime", []string{"-n", cl.ns, "usage", "--by", "runtime"}, `
RUNTIME       RUNS   INPUT   OUTPUT   CACHE READ   CACHE WRITE   TOTAL   COST
claude-code   3      63      135      3000         900           4098    $0.0645
TOTAL         3      63      135      3000         900           4098    $0.0645
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cl.plugin(c.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if want := strings.TrimPrefix(c.want, "\n"); r.stdout != want {
				t.Errorf("got\n%s\nwant\n%s", r.stdout, want)
			}
		})
	}
	r := cl.plugin("usage", "-n", other.ns, "-l", "plugin-test=nobody", "--since", "7d")
	if r.code != 0 || r.stdout != "" || r.stderr != fmt.Sprintf("No AgentRuns found in %s namespace that ended within 7d or are in progress.\n", other.ns) {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
