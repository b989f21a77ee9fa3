package controllers

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/testenv"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

// The events sidecar's live document and status keep as many models, so
// the live and the final by-model split agree.
func TestByModelBoundIsOne(t *testing.T) {
	if progress.MaxModels != v1alpha1.MaxByModel {
		t.Fatalf("progress.MaxModels %d, v1alpha1.MaxByModel %d", progress.MaxModels, v1alpha1.MaxByModel)
	}
}

// TestStatusUsageBounded: an agent that names 20,000 models, or models
// with names status cannot hold, gets the largest MaxByModel models in
// status, byModelTruncated, and whole totals.
func TestStatusUsageBounded(t *testing.T) {
	many := events.NewTotals()
	for i := range 20000 {
		many.AddModel(fmt.Sprintf("model-%05d", i), events.TokenCounts{InputTokens: events.Int64(int64(i + 1))})
	}
	u := statusUsage(many)
	if len(u.ByModel) != v1alpha1.MaxByModel || !u.ByModelTruncated {
		t.Fatalf("%d models, truncated %v", len(u.ByModel), u.ByModelTruncated)
	}
	if _, ok := u.ByModel["model-19999"]; !ok {
		t.Error("the largest model is not kept")
	}
	if _, ok := u.ByModel["model-00000"]; ok {
		t.Error("the smallest model is kept")
	}
	if want := int64(20000 * 20001 / 2); u.TotalTokens == nil || *u.TotalTokens != want {
		t.Errorf("total %v, want the whole %d", u.TotalTokens, want)
	}

	odd := events.NewTotals()
	odd.AddModel(strings.Repeat("m", v1alpha1.MaxModelNameBytes+1), events.TokenCounts{InputTokens: events.Int64(5)})
	odd.AddModel("\xff\xfe", events.TokenCounts{InputTokens: events.Int64(5)})
	odd.AddModel("fine", events.TokenCounts{InputTokens: events.Int64(1)})
	u = statusUsage(odd)
	if len(u.ByModel) != 1 || u.ByModel["fine"].InputTokens == nil || !u.ByModelTruncated || *u.TotalTokens != 11 {
		t.Errorf("by model %v truncated %v total %v: want only fine, truncated, total 11", u.ByModel, u.ByModelTruncated, *u.TotalTokens)
	}

	few := events.NewTotals()
	few.AddModel("a", events.TokenCounts{InputTokens: events.Int64(1)})
	if u := statusUsage(few); len(u.ByModel) != 1 || u.ByModelTruncated {
		t.Errorf("one model: %v truncated %v", u.ByModel, u.ByModelTruncated)
	}
}

func TestStatusSessionIDAndCounts(t *testing.T) {
	for _, tc := range []struct {
		id   *string
		want string
	}{
		{nil, ""},
		{ptr.To("s-1"), "s-1"},
		{ptr.To(strings.Repeat("x", maxSessionIDBytes)), strings.Repeat("x", maxSessionIDBytes)},
		{ptr.To(strings.Repeat("x", maxSessionIDBytes+1)), ""},
		{ptr.To("\xff"), ""},
	} {
		if got := statusSessionID(tc.id); got != tc.want {
			t.Errorf("statusSessionID(%v) = %q, want %q", tc.id, got, tc.want)
		}
	}
	c := statusCounters(events.Counters{Tools: math.MaxInt32 + 10, ToolErrors: -1, Denials: 3})
	if c.Tools != math.MaxInt32 || c.ToolErrors != 0 || c.Denials != 3 {
		t.Errorf("counters %+v: want held at MaxInt32, not below 0", c)
	}
}

// TestTrimStatus: the status written after a RequestEntityTooLarge keeps
// the end, totals and counters and drops what the event log has in full.
func TestTrimStatus(t *testing.T) {
	st := v1alpha1.AgentRunStatus{
		Phase: v1alpha1.PhaseSucceeded, EndStatus: events.StatusFinished,
		Result: ptr.To(strings.Repeat("r", 1000)), Detail: strings.Repeat("d", 1000),
		Usage:       &v1alpha1.Usage{TotalTokens: ptr.To(int64(7)), ByModel: map[string]v1alpha1.TokenCounts{"a": {}}},
		Counters:    &v1alpha1.Counters{Tools: 4},
		Progress:    &v1alpha1.Progress{ToolCalls: 4, Activity: "[main] tool Bash"},
		LabelsAtEnd: map[string]string{"team": "a"},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: "Finished",
			Message: strings.Repeat("m", 1000)}},
	}
	before := *st.DeepCopy()
	got := trimStatus(st)
	if got.Result != nil || !got.ResultTruncated || got.Usage.ByModel != nil || !got.Usage.ByModelTruncated ||
		*got.Usage.TotalTokens != 7 || got.Counters.Tools != 4 || got.Progress.Activity != "" || got.Progress.ToolCalls != 4 || got.LabelsAtEnd != nil ||
		got.Phase != v1alpha1.PhaseSucceeded || got.EndStatus != events.StatusFinished {
		t.Errorf("trimmed %+v", got)
	}
	if len(got.Detail) > maxTrimmedTextBytes+len("…") || len(got.Conditions[0].Message) > maxTrimmedTextBytes+len("…") {
		t.Errorf("detail %d bytes, message %d bytes", len(got.Detail), len(got.Conditions[0].Message))
	}
	if *st.Result != *before.Result || len(st.Usage.ByModel) != 1 || st.Conditions[0].Message != before.Conditions[0].Message {
		t.Error("trimStatus changed its argument")
	}
	if !tooLarge(apierrors.NewRequestEntityTooLargeError("limit is 3145728")) || !tooLarge(apierrors.NewInternalError(fmt.Errorf("etcdserver: request is too large"))) ||
		tooLarge(nil) || tooLarge(apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("agentruns").GroupResource(), "r", nil)) {
		t.Error("tooLarge")
	}
}

// TestManyModelsEndTheRun: the reproduction. An agent that names
// 20,000 models, whose end summary had to cut the split so that the
// manager reads the end from the event log, still ends Succeeded: status
// holds the 64 largest models, byModelTruncated, and the whole totals.
// The API server itself refuses a status with more models than the CRD's
// maxProperties.
func TestManyModelsEndTheRun(t *testing.T) {
	h := newHarness(t)
	h.createRun("many", nil)
	pod := h.startPod(h.job("many"))
	end := anEnd("done")
	for i := range 20000 {
		end.Usage.AddModel(fmt.Sprintf("model-%05d", i), events.TokenCounts{InputTokens: events.Int64(int64(i + 1))})
	}
	h.logs.set(h.ns, pod.Name, append(endLine(end), '\n'), nil)
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(end), true))
	run := h.phaseIs("many", v1alpha1.PhaseSucceeded)
	u := run.Status.Usage
	if len(u.ByModel) != v1alpha1.MaxByModel || !u.ByModelTruncated || *u.TotalTokens != *end.Usage.Total() {
		t.Errorf("%d models, truncated %v, total %d (want %d)", len(u.ByModel), u.ByModelTruncated, *u.TotalTokens, *end.Usage.Total())
	}
	if _, ok := u.ByModel["model-19999"]; !ok {
		t.Error("the largest model is not in status")
	}
	if h.logs.readCount() == 0 {
		t.Error("the event log was not read: the summary did not cut the split")
	}

	over := map[string]v1alpha1.TokenCounts{}
	for i := range v1alpha1.MaxByModel + 1 {
		over[fmt.Sprintf("m%d", i)] = v1alpha1.TokenCounts{}
	}
	run.Status.Usage.ByModel = over
	if err := h.c.Status().Update(h.ctx, run); err == nil || !strings.Contains(err.Error(), "status.usage.byModel") {
		t.Errorf("a status with %d models: %v, want the CRD's refusal", len(over), err)
	}
}

// The manager's cache keeps no managedFields (often the larger part of an
// object, never read).
func TestCacheStripsManagedFields(t *testing.T) {
	tr := CacheOptions().DefaultTransform
	if tr == nil {
		t.Fatal("no DefaultTransform")
	}
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := tr(run)
	if err != nil {
		t.Fatal(err)
	}
	if mf := out.(*v1alpha1.AgentRun).ManagedFields; len(mf) != 0 {
		t.Errorf("managedFields %v kept", mf)
	}
}

// The manager's cache keeps no Job's Pod template (most of a Job, never
// read back) nor its managedFields, and keeps what the manager reads.
func TestCacheStripsJobTemplates(t *testing.T) {
	var tr func(any) (any, error)
	for obj, opts := range CacheOptions().ByObject {
		if _, ok := obj.(*batchv1.Job); ok {
			tr = opts.Transform
		}
	}
	if tr == nil {
		t.Fatal("no Transform for Jobs")
	}
	suspend, deadline := true, int64(600)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: map[string]string{LabelManagedBy: ManagedBy},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "manager"}}},
		Spec: batchv1.JobSpec{Suspend: &suspend, ActiveDeadlineSeconds: &deadline, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Args: []string{"run", "--runtime", "claude-code"}}}}}},
		Status: batchv1.JobStatus{Active: 1}}
	out, err := tr(job)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*batchv1.Job)
	if len(got.Spec.Template.Spec.Containers) != 0 || len(got.ManagedFields) != 0 {
		t.Errorf("template %+v, managedFields %v kept", got.Spec.Template, got.ManagedFields)
	}
	if got.Name != "j" || got.Labels[LabelManagedBy] != ManagedBy || !*got.Spec.Suspend || *got.Spec.ActiveDeadlineSeconds != 600 || got.Status.Active != 1 {
		t.Errorf("the transform lost what the manager reads: %+v", got)
	}
}

// TestStatusTooLargeIsTrimmed: the API server's own refusal. On an API
// server whose etcd takes requests of at most 300 KiB, a run whose spec
// and annotations are large (the 192 KiB prompt, 72 KiB of annotations:
// fields the user controls) ends with a 32 KiB result and 64 models:
// the full status is refused as too large, and the trimmed one is written
// (no result, no by-model split), so the run still ends, with a Warning
// Event saying what was left out.
func TestStatusTooLargeIsTrimmed(t *testing.T) {
	te := testenv.StartT(t, testenv.Options{EtcdArgs: map[string]string{"max-request-bytes": strconv.Itoa(300 << 10)}})
	cfg := te.Config
	h := newHarnessOn(t, cfg)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "large", Namespace: h.ns,
		Annotations: map[string]string{"example.com/notes": strings.Repeat("n", 72<<10)}},
		Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Prompt: v1alpha1.PromptSource{Text: ptr.To(strings.Repeat("p", 196608))}}}
	if err := h.c.Create(h.ctx, run); err != nil {
		t.Fatalf("create: %v", err)
	}
	pod := h.startPod(h.job("large"))
	end := anEnd(strings.Repeat("r", 40<<10))
	for i := range v1alpha1.MaxByModel {
		end.Usage.AddModel(fmt.Sprintf("model-with-a-rather-long-name-%03d", i), events.TokenCounts{InputTokens: events.Int64(int64(i + 1))})
	}
	h.logs.set(h.ns, pod.Name, append(endLine(end), '\n'), nil)
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(end), true))
	got := h.phaseIs("large", v1alpha1.PhaseSucceeded)
	st := got.Status
	if st.Result != nil || !st.ResultTruncated || st.Usage == nil || st.Usage.ByModel != nil || !st.Usage.ByModelTruncated ||
		st.Usage.TotalTokens == nil || *st.Usage.TotalTokens != *end.Usage.Total() || st.EndStatus != events.StatusFinished {
		t.Errorf("status after the refusal: result %v (truncated %v), usage %+v, endStatus %q", st.Result != nil, st.ResultTruncated, st.Usage, st.EndStatus)
	}
	h.eventually("a StatusTrimmed Event", func() string {
		for _, e := range h.events("large") {
			if strings.HasPrefix(e, "Warning/StatusTrimmed: the API server refused the status as too large") {
				return ""
			}
		}
		return fmt.Sprintf("events %q", h.events("large"))
	})
}
