package controllers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestBudgetCRDValidation: the API server accepts the sample AgentBudget
// and refuses budgets that could not work, with a message that says what
// to set.
func TestBudgetCRDValidation(t *testing.T) {
	c, ns := crdClient(t)
	b, err := os.ReadFile(filepath.Join("..", "config", "samples", "agentbudget_v1alpha1_team-daily.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &v1alpha1.AgentBudget{}
	if err := yaml.UnmarshalStrict(b, sample); err != nil {
		t.Fatal(err)
	}
	sample.Namespace = ns
	if err := c.Create(context.Background(), sample, client.DryRunAll); err != nil {
		t.Errorf("the sample is refused: %v", err)
	}
	day := v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay}
	selecting := func(r v1alpha1.BudgetSelectorRequirement) v1alpha1.AgentBudgetSpec {
		return v1alpha1.AgentBudgetSpec{Window: day, MaxTokens: ptr.To[int64](1),
			Selector: &v1alpha1.BudgetSelector{MatchExpressions: []v1alpha1.BudgetSelectorRequirement{r}}}
	}
	for _, sel := range []*v1alpha1.BudgetSelector{
		{MatchLabels: map[string]v1alpha1.LabelValue{"team": "a", "agentrun.dev/tier": "", "example.com/cost-center": "cc-1.2_x"}},
		{MatchExpressions: []v1alpha1.BudgetSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []v1alpha1.LabelValue{"a", "b"}},
			{Key: "app.kubernetes.io/part-of", Operator: metav1.LabelSelectorOpDoesNotExist}}},
	} {
		b := &v1alpha1.AgentBudget{ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: ns},
			Spec: v1alpha1.AgentBudgetSpec{Window: day, MaxTokens: ptr.To[int64](1), Selector: sel}}
		if err := c.Create(context.Background(), b, client.DryRunAll); err != nil {
			t.Errorf("selector %+v is refused: %v", sel, err)
		}
	}
	for _, tc := range []struct {
		name string
		spec v1alpha1.AgentBudgetSpec
		want string
	}{
		{"no cap", v1alpha1.AgentBudgetSpec{Window: day}, "set maxTokens, maxCostUSD or both"},
		{"two windows", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "24h", Calendar: v1alpha1.CalendarDay}, MaxTokens: ptr.To[int64](1)},
			"set exactly one of rolling"},
		{"no window", v1alpha1.AgentBudgetSpec{MaxTokens: ptr.To[int64](1)}, "set exactly one of rolling"},
		{"a time zone for a rolling window", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "24h", TimeZone: "UTC"}, MaxTokens: ptr.To[int64](1)},
			"window.timeZone belongs to a calendar window"},
		{"a rolling window too short", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Rolling: "30s"}, MaxTokens: ptr.To[int64](1)},
			"window.rolling must be a duration from 1m to 744h"},
		{"an unknown period", v1alpha1.AgentBudgetSpec{Window: v1alpha1.BudgetWindow{Calendar: "Fortnight"}, MaxTokens: ptr.To[int64](1)},
			"spec.window.calendar"},
		{"a cost that is no decimal", v1alpha1.AgentBudgetSpec{Window: day, MaxCostUSD: "$5"}, "spec.maxCostUSD"},
		{"zero tokens", v1alpha1.AgentBudgetSpec{Window: day, MaxTokens: ptr.To[int64](0)}, "spec.maxTokens"},
		// Selectors that would otherwise cover nothing.
		{"an unknown operator", selecting(v1alpha1.BudgetSelectorRequirement{Key: "team", Operator: "Equals", Values: []v1alpha1.LabelValue{"a"}}),
			"spec.selector.matchExpressions[0].operator"},
		{"In without values", selecting(v1alpha1.BudgetSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn}),
			"In and NotIn need values"},
		{"Exists with values", selecting(v1alpha1.BudgetSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpExists, Values: []v1alpha1.LabelValue{"a"}}),
			"Exists and DoesNotExist take none"},
		{"a key that is no label key", selecting(v1alpha1.BudgetSelectorRequirement{Key: "team a", Operator: metav1.LabelSelectorOpExists}),
			"spec.selector.matchExpressions[0].key"},
		{"a value that is no label value", selecting(v1alpha1.BudgetSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []v1alpha1.LabelValue{"a b"}}),
			"spec.selector.matchExpressions[0].values[0]"},
		{"a matchLabels key that is no label key", v1alpha1.AgentBudgetSpec{Window: day, MaxTokens: ptr.To[int64](1),
			Selector: &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"-team": "a"}}}, "a key is a label key"},
		{"a matchLabels value that is no label value", v1alpha1.AgentBudgetSpec{Window: day, MaxTokens: ptr.To[int64](1),
			Selector: &v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"team": v1alpha1.LabelValue(strings.Repeat("a", 64))}}}, "spec.selector.matchLabels.team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &v1alpha1.AgentBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns}, Spec: tc.spec}
			err := c.Create(context.Background(), b, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
