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
