package v1alpha1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCovers(t *testing.T) {
	now := metav1.Now()
	run := func(ns string, labels, atEnd map[string]string, ended bool) *AgentRun {
		r := &AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: labels}, Status: AgentRunStatus{LabelsAtEnd: atEnd}}
		if ended {
			r.Status.CompletionTime = &now
		}
		return r
	}
	teamA := &BudgetSelector{MatchLabels: map[string]LabelValue{"team": "a"}}
	notB := &BudgetSelector{MatchExpressions: []BudgetSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []LabelValue{"b"}}}}
	unreadable := &BudgetSelector{MatchLabels: map[string]LabelValue{strings.Repeat("a", 254) + "/team": "a"}}
	a, b := map[string]string{"team": "a"}, map[string]string{"team": "b"}
	for _, tc := range []struct {
		name string
		sel  *BudgetSelector
		run  *AgentRun
		want bool
	}{
		{"no selector: the namespace", nil, run("ns", nil, nil, false), true},
		{"another namespace", nil, run("other", a, nil, false), false},
		{"matching labels", teamA, run("ns", a, nil, false), true},
		{"other labels", teamA, run("ns", b, nil, false), false},
		{"NotIn", notB, run("ns", b, nil, false), false},
		{"ended: the labels at its end", teamA, run("ns", b, a, true), true},
		{"ended, relabelled into the budget: still the labels at its end", teamA, run("ns", a, b, true), false},
		{"ended before labelsAtEnd: its labels", teamA, run("ns", a, nil, true), true},
		{"running: its labels, not a stale labelsAtEnd", teamA, run("ns", b, a, false), false},
		{"a selector that does not parse covers the namespace", unreadable, run("ns", b, nil, false), true},
		{"... not another namespace", unreadable, run("other", b, nil, false), false},
	} {
		bud := &AgentBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: AgentBudgetSpec{Selector: tc.sel}}
		if got := bud.Covers(tc.run); got != tc.want {
			t.Errorf("%s: Covers %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := unreadable.Parse(); err == nil {
		t.Error("a prefix of 254 characters parses")
	}
	if (*BudgetSelector)(nil).LabelSelector() != nil {
		t.Error("nil selector")
	}
}
