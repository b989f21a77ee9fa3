package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
)

// annotateNamespace sets the harness namespace's annotations.
func (h *harness) annotateNamespace(ann map[string]string) {
	h.t.Helper()
	ns := &corev1.Namespace{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: h.ns}, ns); err != nil {
		h.t.Fatal(err)
	}
	ns.Annotations = ann
	if err := h.c.Update(h.ctx, ns); err != nil {
		h.t.Fatal(err)
	}
}

// endedRunWithLabels runs a labelled run to its end, a minute of the
// fake clock after the previous one.
func (h *harness) endedRunWithLabels(name string, labels map[string]string) {
	h.t.Helper()
	h.clock.Step(time.Minute)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns, Labels: labels},
		Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Prompt: v1alpha1.PromptSource{Text: ptr.To("say hi")}}}
	if err := h.c.Create(h.ctx, run); err != nil {
		h.t.Fatal(err)
	}
	pod := h.startPod(h.job(name))
	h.setStatus(pod, running(h.clock.Now()))
	h.phaseIs(name, v1alpha1.PhaseRunning)
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", endWith(events.StatusFinished, 10, "claude-haiku-4-5"), true))
	h.phaseIs(name, v1alpha1.PhaseSucceeded)
}

func (h *harness) runExists(name string) string {
	err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &v1alpha1.AgentRun{})
	if err != nil {
		return fmt.Sprintf("AgentRun %s: %v", name, err)
	}
	return ""
}

// TestRecordsExpire: a namespace with a history limit of one keeps its
// newest ended run, and deletes the older one with an Event saying why;
// a run Argo CD tracks and one a budget's window still counts stay.
func TestRecordsExpire(t *testing.T) {
	h := newHarness(t)
	h.annotateNamespace(map[string]string{v1alpha1.AnnotationRecordsHistoryLimit: "1"})
	h.createBudget("billed", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "24h"}, MaxTokens: ptr.To[int64](1 << 40),
		Selector: &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"team": "billed"}}})

	h.endedRunWithLabels("billed", map[string]string{"team": "billed"})
	h.endedRunWithLabels("tracked", map[string]string{"app.kubernetes.io/instance": "agents"})
	h.endedRunWithLabels("old", nil)
	h.endedRunWithLabels("new", nil)

	h.eventually("the older untracked run deleted", func() string {
		err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "old"}, &v1alpha1.AgentRun{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("AgentRun old: %v", err)
		}
		return ""
	})
	h.eventually("an Event says why", func() string {
		for _, e := range h.events("old") {
			if strings.HasPrefix(e, "Normal/RecordExpired: deleted: beyond the namespace's history limit of 1 ended runs") {
				return ""
			}
		}
		return fmt.Sprintf("events of old: %q", h.events("old"))
	})
	h.consistently("the newest, the tracked and the budgeted run stay", 2*time.Second, func() string {
		return h.runExists("new") + h.runExists("tracked") + h.runExists("billed")
	})
}

// TestRecordsAnnotationThatDoesNotParse: a value that does not parse
// deletes nothing, and says so.
func TestRecordsAnnotationThatDoesNotParse(t *testing.T) {
	h := newHarness(t)
	h.annotateNamespace(map[string]string{v1alpha1.AnnotationRecordsHistoryLimit: "a few"})
	h.endedRunWithLabels("first", nil)
	h.endedRunWithLabels("second", nil)
	h.eventually("a Warning Event on the Namespace", func() string {
		list := &corev1.EventList{}
		if err := h.c.List(h.ctx, list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return err.Error()
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Namespace" && e.InvolvedObject.Name == h.ns && e.Reason == "InvalidRecordRetention" &&
				strings.Contains(e.Message, `"a few" is not a count`) && strings.Contains(e.Message, "no AgentRun expires until it is fixed") {
				return ""
			}
		}
		return "no InvalidRecordRetention Event"
	})
	h.consistently("both runs stay", 2*time.Second, func() string { return h.runExists("first") + h.runExists("second") })
}
