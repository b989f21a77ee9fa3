package controllers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	lua "github.com/yuin/gopher-lua"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// What GitOps tools read from an AgentRun: kstatus (Flux's default, kpt),
// the Argo CD health check and the Flux health expressions shipped in
// charts/agentrun/docs, each computed for the same AgentRuns: one in every
// state the controller writes, made by its own pure functions, plus the
// two states the API server shows before the controller has written (a
// new run, a spec.cancel not yet observed).

// healthState is one AgentRun as the API server returns it, and what each
// tool must make of it.
type healthState struct {
	name    string
	obj     map[string]any
	kstatus kstatus.Status
	argo    string // Argo CD health: Progressing, Healthy, Degraded
	flux    kstatus.Status
}

// asServed is the AgentRun as JSON from the API server: generation and
// status as given.
func asServed(t *testing.T, generation int64, st v1alpha1.AgentRunStatus) map[string]any {
	t.Helper()
	run := newRun("r", nil)
	run.Generation = generation
	run.Spec.Cancel = generation > 1 // the only spec change there can be
	run.Status = st
	run.APIVersion, run.Kind = v1alpha1.GroupVersion.String(), "AgentRun"
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	// Decoded as clients decode the API server's JSON (integers int64).
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u.Object
}

// written is the status the controller writes for obs on top of old.
func written(old v1alpha1.AgentRunStatus, generation int64, obs observation) v1alpha1.AgentRunStatus {
	oc, _ := computeOutcome(obs, DefaultGraces)
	return computeStatus(old, generation, obs, oc)
}

func healthStates(t *testing.T) []healthState {
	now := t0.Add(2 * time.Minute)
	queuedJob := testJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })
	running := written(v1alpha1.AgentRunStatus{}, 1, observation{Now: now, Job: testJob(nil), Pod: testPod(agentRunning)})
	ended := func(gen int64, obs observation) v1alpha1.AgentRunStatus {
		obs.Now, obs.Started = now, true
		if obs.Job == nil {
			obs.Job = testJob(nil)
		}
		st := written(running, gen, obs)
		if !isTerminal(st) {
			t.Fatalf("no end from %+v", obs)
		}
		return st
	}
	succeeded := ended(1, observation{Pod: testPod(agentTerminated(0, "Completed", "")), Summary: endSummary(events.StatusFinished, "done")})
	cancelledPod := testPod(func(p *corev1.Pod) {
		agentTerminated(130, "Error", "")(p)
		deletedAt(t0, 30)(p)
	})
	// A new AgentRun reads back with the status default only
	// (TestNewRunReadsInProgress checks that against the API server).
	fresh := asServed(t, 1, v1alpha1.AgentRunStatus{})
	fresh["status"] = map[string]any{"observedGeneration": int64(0)}

	const (
		progressing = "Progressing"
		healthy     = "Healthy"
		degraded    = "Degraded"
	)
	inProgress, current, failed := kstatus.InProgressStatus, kstatus.CurrentStatus, kstatus.FailedStatus
	return []healthState{
		{"new, status not written yet", fresh, inProgress, progressing, inProgress},
		{"pending: the Job is created", asServed(t, 1, written(v1alpha1.AgentRunStatus{}, 1, observation{Now: now, Job: testJob(nil)})),
			inProgress, progressing, inProgress},
		{"pending: the Pod pulls its image", asServed(t, 1, written(v1alpha1.AgentRunStatus{}, 1, observation{Now: now, Job: testJob(nil),
			Pod: testPod(waiting(podcontract.AgentContainer, "ContainerCreating"))})), inProgress, progressing, inProgress},
		{"queued", asServed(t, 1, written(v1alpha1.AgentRunStatus{}, 1, observation{Now: now, Job: queuedJob})), inProgress, progressing, inProgress},
		{"running", asServed(t, 1, running), inProgress, progressing, inProgress},
		{"succeeded", asServed(t, 1, succeeded), current, healthy, current},
		{"failed", asServed(t, 1, ended(1, observation{Pod: testPod(agentTerminated(1, "Error", "")),
			Summary: endSummary(events.StatusFailed, "")})), failed, degraded, failed},
		{"timeout", asServed(t, 1, ended(1, observation{Pod: testPod(agentTerminated(124, "Error", "")),
			Summary: endSummary(events.StatusTimeout, "")})), failed, degraded, failed},
		{"limit", asServed(t, 1, ended(1, observation{Pod: testPod(agentTerminated(3, "Error", "")),
			Summary: endSummary(events.StatusLimit, "")})), failed, degraded, failed},
		{"OOM-killed, no summary", asServed(t, 1, ended(1, observation{Pod: testPod(agentTerminated(137, "OOMKilled", ""))})),
			failed, degraded, failed},
		{"Pod vanished", asServed(t, 1, ended(1, observation{PodGone: true})), failed, degraded, failed},
		{"Job deadline", asServed(t, 1, ended(1, observation{Job: testJob(jobFailed(batchv1.JobReasonDeadlineExceeded, t0))})),
			failed, degraded, failed},
		{"Pod deleted mid-run", asServed(t, 1, ended(1, observation{Pod: cancelledPod, Summary: endSummary(events.StatusInterrupted, "")})),
			failed, degraded, failed},
		{"cancel set, not yet observed", asServed(t, 2, running), inProgress, progressing, inProgress},
		{"cancelled while running", asServed(t, 2, ended(2, observation{Cancel: true, Pod: cancelledPod,
			Summary: endSummary(events.StatusInterrupted, "partial")})), failed, degraded, failed},
		{"cancelled while queued", asServed(t, 2, written(v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseQueued}, 2,
			observation{Now: now, Cancel: true, Job: queuedJob})), failed, degraded, failed},
		{"cancelled before its Job", asServed(t, 2, written(v1alpha1.AgentRunStatus{}, 2, observation{Now: now, Cancel: true})),
			failed, degraded, failed},
		{"held by a spent budget", asServed(t, 1, applyHold(written(v1alpha1.AgentRunStatus{}, 1, observation{Now: now}),
			hold{Reason: ReasonBudgetExhausted, Message: "AgentBudget b is spent"}, 1, now)), inProgress, progressing, inProgress},
		{"stopped for a budget", asServed(t, 1, func() v1alpha1.AgentRunStatus {
			obs := observation{Now: now, Started: true, Job: testJob(nil), Summary: endSummary(events.StatusInterrupted, "partial"),
				Pod: testPod(func(p *corev1.Pod) {
					agentTerminated(130, "Error", "")(p)
					deletedAt(t0, 30)(p)
					p.Annotations = map[string]string{AnnotationStopReason: ReasonBudgetExceeded, AnnotationStopMessage: "AgentBudget b is spent"}
				})}
			oc, _ := computeOutcome(obs, DefaultGraces)
			return computeStatus(running, 1, obs, refineOutcome(obs, oc))
		}()), failed, degraded, failed},
		{"cancel set after the end, not yet observed", asServed(t, 2, succeeded), inProgress, progressing, inProgress},
		{"cancel set after the end, observed", asServed(t, 2, written(succeeded, 2, observation{Now: now.Add(time.Hour), Cancel: true})),
			current, healthy, current},
	}
}

// TestHealthStatesCoverEveryPhase: the table holds every phase and every
// end the controller can write.
func TestHealthStatesCoverEveryPhase(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range healthStates(t) {
		st, _ := s.obj["status"].(map[string]any)
		phase, _ := st["phase"].(string)
		seen[phase] = true
		if reason := conditionReason(st, v1alpha1.ConditionSucceeded); reason != "" {
			seen[reason] = true
		}
	}
	for _, want := range []string{"Pending", "Queued", "Running", "Succeeded", "Failed", "Finished", "Timeout", "Limit",
		ReasonCancelled, ReasonOOMKilled, ReasonPodDeleted, ReasonPodVanished, ReasonDeadlineExceeded} {
		if !seen[want] {
			t.Errorf("no state with %s", want)
		}
	}
}

func conditionReason(st map[string]any, typ string) string {
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			return m["reason"].(string)
		}
	}
	return ""
}

// TestKstatus: the real kstatus library reads a run in progress as
// InProgress, a succeeded one as Current and any other end as Failed.
func TestKstatus(t *testing.T) {
	for _, s := range healthStates(t) {
		t.Run(s.name, func(t *testing.T) {
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: s.obj})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != s.kstatus {
				t.Errorf("kstatus %s (%s), want %s", res.Status, res.Message, s.kstatus)
			}
		})
	}
}

// TestArgoCDHealthCheck runs charts/agentrun/docs/argocd-health.lua as Argo
// CD does: in gopher-lua (Argo CD's interpreter) with the object as the
// global obj and only the base, table, string and math libraries.
func TestArgoCDHealthCheck(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "charts", "agentrun", "docs", "argocd-health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range healthStates(t) {
		t.Run(s.name, func(t *testing.T) {
			status, message, err := argoHealth(string(script), s.obj)
			if err != nil {
				t.Fatal(err)
			}
			if status != s.argo || message == "" {
				t.Errorf("health %s %q, want %s", status, message, s.argo)
			}
		})
	}
	// Deletion in progress is Progressing, as for Argo CD's own checks.
	obj := healthStates(t)[5].obj // succeeded
	obj["metadata"].(map[string]any)["deletionTimestamp"] = "2026-10-04T13:00:00Z"
	if status, _, err := argoHealth(string(script), obj); err != nil || status != "Progressing" {
		t.Errorf("a run being deleted: %s %v", status, err)
	}
}

func argoHealth(script string, obj map[string]any) (status, message string, err error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return "", "", err
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", L.Get(-1).Type())
	}
	return lua.LVAsString(hs.RawGetString("status")), lua.LVAsString(hs.RawGetString("message")), nil
}

// toLua converts decoded JSON as Argo CD does: objects and arrays become
// tables (arrays 1-based), numbers LNumber.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for i, e := range v {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	}
	return lua.LNil
}

// TestFluxHealthCheck evaluates the healthCheckExprs entry of
// charts/agentrun/docs/flux-healthcheck.yaml as Flux's kustomize-controller
// does (RFC-0009): InProgress while status.observedGeneration differs from
// metadata.generation, then inProgress, failed and current in that order,
// the first true one deciding, none true being InProgress; the object's
// top-level fields are the CEL variables.
func TestFluxHealthCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "charts", "agentrun", "docs", "flux-healthcheck.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ks struct {
		Kind string `json:"kind"`
		Spec struct {
			Wait             bool `json:"wait"`
			HealthCheckExprs []struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				InProgress string `json:"inProgress"`
				Failed     string `json:"failed"`
				Current    string `json:"current"`
			} `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &ks); err != nil {
		t.Fatal(err)
	}
	if ks.Kind != "Kustomization" || !ks.Spec.Wait || len(ks.Spec.HealthCheckExprs) != 1 {
		t.Fatalf("want one healthCheckExprs entry in a Kustomization that waits: %+v", ks)
	}
	e := ks.Spec.HealthCheckExprs[0]
	if e.APIVersion != v1alpha1.GroupVersion.String() || e.Kind != "AgentRun" || e.InProgress == "" || e.Failed == "" || e.Current == "" {
		t.Fatalf("entry %+v", e)
	}
	env, err := cel.NewEnv(cel.Variable("apiVersion", cel.DynType), cel.Variable("kind", cel.DynType),
		cel.Variable("metadata", cel.DynType), cel.Variable("spec", cel.DynType), cel.Variable("status", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	type check struct {
		prg    cel.Program
		status kstatus.Status
	}
	var checks []check
	for _, c := range []struct {
		expr   string
		status kstatus.Status
	}{{e.InProgress, kstatus.InProgressStatus}, {e.Failed, kstatus.FailedStatus}, {e.Current, kstatus.CurrentStatus}} {
		ast, iss := env.Compile(c.expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", c.expr, iss.Err())
		}
		if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
			t.Fatalf("%s is of type %s, not bool", c.expr, ast.OutputType())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, check{prg, c.status})
	}
	flux := func(obj map[string]any) (kstatus.Status, error) {
		u := &unstructured.Unstructured{Object: obj}
		if og, found, _ := unstructured.NestedInt64(obj, "status", "observedGeneration"); found && og != u.GetGeneration() {
			return kstatus.InProgressStatus, nil
		}
		for _, c := range checks {
			out, _, err := c.prg.Eval(obj)
			if err != nil {
				return "", err
			}
			if out.Value() == true {
				return c.status, nil
			}
		}
		return kstatus.InProgressStatus, nil
	}
	for _, s := range healthStates(t) {
		t.Run(s.name, func(t *testing.T) {
			got, err := flux(s.obj)
			if err != nil {
				t.Fatalf("evaluation failed (Flux fails the health check): %v", err)
			}
			if got != s.flux {
				t.Errorf("Flux status %s, want %s", got, s.flux)
			}
		})
	}
}
