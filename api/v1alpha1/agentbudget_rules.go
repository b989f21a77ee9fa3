package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The budget rules that the manager applies and that readers of the API
// (the kubectl plugin's views) show: one home for each.

// Covers reports whether the budget covers run: the same namespace, and
// the selector (none: every run) matches the run's BudgetLabels. A
// selector that does not parse covers every run of the namespace (fail
// closed: the budget holds them, condition Exhausted, reason
// InvalidSelector, until it is fixed).
func (b *AgentBudget) Covers(run *AgentRun) bool {
	if b.Namespace != run.Namespace {
		return false
	}
	if b.Spec.Selector == nil {
		return true
	}
	sel, err := b.Spec.Selector.Parse()
	return err != nil || sel.Matches(labels.Set(run.BudgetLabels()))
}

// Parse is the selector as a labels.Selector, or why it is not one.
func (s *BudgetSelector) Parse() (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s.LabelSelector())
}

// BudgetLabels are the labels budgets pick run by: those it had when it
// ended (status.labelsAtEnd), else its labels.
func (run *AgentRun) BudgetLabels() map[string]string {
	if run.Status.CompletionTime != nil && len(run.Status.LabelsAtEnd) > 0 {
		return run.Status.LabelsAtEnd
	}
	return run.Labels
}

// SpentMessage is the message of a run the budget holds back or stops:
// "AgentBudget NAME is spent", and the Exhausted condition's message.
func (b *AgentBudget) SpentMessage() string {
	msg := spentPrefix + b.Name + spentSuffix
	if c := meta.FindStatusCondition(b.Status.Conditions, ConditionExhausted); c != nil && c.Message != "" {
		msg += ": " + c.Message
	}
	return msg
}

const (
	spentPrefix = "AgentBudget "
	spentSuffix = " is spent"
)

// HoldingBudget is the name of the budget that holds a queued run back
// (its Running condition's reason BudgetExhausted, the message
// SpentMessage wrote), or "".
func HoldingBudget(run *AgentRun) string {
	if run.Status.Phase != PhaseQueued {
		return ""
	}
	c := meta.FindStatusCondition(run.Status.Conditions, ConditionRunning)
	if c == nil || c.Reason != ReasonBudgetExhausted || !strings.HasPrefix(c.Message, spentPrefix) {
		return ""
	}
	name, _, ok := strings.Cut(strings.TrimPrefix(c.Message, spentPrefix), spentSuffix)
	if !ok {
		return ""
	}
	return name
}
