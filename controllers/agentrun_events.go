package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// event is a Kubernetes Event to record on the AgentRun once the status
// that caused it is written.
type event struct {
	Type, Reason, Message string
}

// computeEvents are the Events of the change from old to new status:
// started, queued, finished and failed with the detail.
func computeEvents(old, st v1alpha1.AgentRunStatus) []event {
	var out []event
	if old.Phase != st.Phase && st.Phase == v1alpha1.PhaseQueued {
		if msg, held := holdDetail(st); held {
			out = append(out, event{corev1.EventTypeNormal, v1alpha1.ReasonBudgetExhausted, msg})
		} else {
			out = append(out, event{corev1.EventTypeNormal, v1alpha1.ReasonQueued, "the Job " + st.JobName + " is suspended until a queue admits it"})
		}
	}
	if old.StartTime == nil && st.StartTime != nil {
		out = append(out, event{corev1.EventTypeNormal, "Started", "the agent started in Pod " + st.PodName})
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c != nil && !isTerminal(st) &&
		(c.Reason == v1alpha1.ReasonPodRejected || c.Reason == v1alpha1.ReasonJobRefused) {
		// Once per refusal message: the refused create is retried with
		// backoff, and each retry repeats it.
		if was := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionStalled); was == nil || was.Message != c.Message || was.Reason != c.Reason {
			out = append(out, event{corev1.EventTypeWarning, c.Reason, c.Message})
		}
	}
	if !isTerminal(old) && isTerminal(st) {
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSucceeded)
		switch {
		case st.Phase == v1alpha1.PhaseSucceeded:
			out = append(out, event{corev1.EventTypeNormal, v1alpha1.ReasonFinished, finishedMessage(st)})
		case c.Reason == v1alpha1.ReasonCancelled:
			// Asked for, so not a warning.
			out = append(out, event{corev1.EventTypeNormal, c.Reason, c.Message})
		default:
			out = append(out, event{corev1.EventTypeWarning, c.Reason, c.Message})
		}
	}
	return out
}

func finishedMessage(st v1alpha1.AgentRunStatus) string {
	m := "the run finished"
	if st.DurationMs != nil {
		m += fmt.Sprintf(" in %s", (time.Duration(*st.DurationMs) * time.Millisecond).Round(time.Millisecond))
	}
	if u := st.Usage; u != nil {
		if u.TotalTokens != nil {
			m += fmt.Sprintf(", %d tokens", *u.TotalTokens)
		}
		if u.CostUSD != "" {
			m += ", $" + u.CostUSD
		}
	}
	return m
}
