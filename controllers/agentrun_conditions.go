package controllers

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// stall is why a run in progress cannot go on: the API server refuses its
// Job (JobRefused) or the Job's Pod (PodRejected), with its answer.
type stall struct {
	Reason, Message string
}

// computeConditions sets the conditions of status st (see the condition
// types in api/v1alpha1 for their polarity and reasons). The reason of an
// end is the outcome's; without one (an ended run reconciled again) the
// Succeeded condition's, which holds it since the end was written. A run
// the API server refuses its Job or Pod (stalled) is Stalled, with the
// server's answer, until it gets them or fails.
func computeConditions(conds []metav1.Condition, st v1alpha1.AgentRunStatus, oc *outcome, stalled *stall, generation int64, now time.Time) []metav1.Condition {
	out := append([]metav1.Condition{}, conds...)
	ts := metav1.NewTime(now)
	cond := func(t string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&out, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
			ObservedGeneration: generation, LastTransitionTime: ts})
	}
	phase := string(st.Phase)
	switch st.Phase {
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed:
		reason := endReason(conds, st, oc)
		msg := conditionMessage(st)
		ok := st.Phase == v1alpha1.PhaseSucceeded
		cond(v1alpha1.ConditionSucceeded, boolStatus(ok), reason, msg)
		cond(v1alpha1.ConditionEnded, metav1.ConditionTrue, reason, msg)
		cond(v1alpha1.ConditionReady, boolStatus(ok), reason, msg)
		cond(v1alpha1.ConditionStalled, boolStatus(!ok), reason, msg)
		cond(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonEnded, "the run has ended")
		cond(v1alpha1.ConditionRunning, metav1.ConditionFalse, v1alpha1.ReasonEnded, "the run has ended")
		return out
	}
	var doing string
	switch st.Phase {
	case v1alpha1.PhaseRunning:
		doing = "the agent runs in Pod " + st.PodName
	case v1alpha1.PhaseQueued:
		doing = "the Job is suspended until a queue (such as Kueue) admits it"
	default:
		phase, doing = string(v1alpha1.PhasePending), "waiting for the agent container to start"
	}
	cond(v1alpha1.ConditionSucceeded, metav1.ConditionUnknown, phase, "the run has not ended")
	cond(v1alpha1.ConditionEnded, metav1.ConditionFalse, phase, "the run has not ended")
	cond(v1alpha1.ConditionReady, metav1.ConditionFalse, phase, "the run has not ended")
	if stalled != nil {
		m := cutText(stalled.Message, maxConditionMessageBytes)
		cond(v1alpha1.ConditionStalled, metav1.ConditionTrue, stalled.Reason, m)
		cond(v1alpha1.ConditionReconciling, metav1.ConditionTrue, stalled.Reason, m)
		cond(v1alpha1.ConditionRunning, metav1.ConditionFalse, phase, doing)
		return out
	}
	cond(v1alpha1.ConditionStalled, metav1.ConditionFalse, phase, "the run has not failed")
	cond(v1alpha1.ConditionReconciling, metav1.ConditionTrue, phase, doing)
	cond(v1alpha1.ConditionRunning, boolStatus(st.Phase == v1alpha1.PhaseRunning), phase, doing)
	return out
}

// endReason is the condition reason of an ended run.
func endReason(conds []metav1.Condition, st v1alpha1.AgentRunStatus, oc *outcome) string {
	if oc != nil {
		return oc.Reason
	}
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionSucceeded); c != nil && c.Status != metav1.ConditionUnknown {
		return c.Reason
	}
	if r := endReasons[st.EndStatus]; r != "" {
		return r
	}
	return v1alpha1.ReasonFailed
}

func boolStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

func conditionMessage(st v1alpha1.AgentRunStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "end status %s", st.EndStatus)
	if st.ExitCode != nil {
		fmt.Fprintf(&b, ", exit code %d", *st.ExitCode)
	}
	if st.Detail != "" {
		b.WriteString(": ")
		b.WriteString(st.Detail)
	}
	m, cut := podcontract.CutUTF8(b.String(), maxConditionMessageBytes)
	if cut {
		m += "…"
	}
	return m
}
