package controllers

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

func TestParseRecordRetention(t *testing.T) {
	ttl, limit := v1alpha1.AnnotationRecordsTTLAfterEnd, v1alpha1.AnnotationRecordsHistoryLimit
	for _, tt := range []struct {
		name    string
		ann     map[string]string
		want    recordRetention
		ok      bool
		wantErr string
	}{
		{name: "not opted in", ann: map[string]string{"other": "x"}},
		{name: "ttl", ann: map[string]string{ttl: "720h"}, want: recordRetention{ttl: 720 * time.Hour}, ok: true},
		{name: "limit", ann: map[string]string{limit: " 100 "}, want: recordRetention{hasLimit: true, limit: 100}, ok: true},
		{name: "limit zero keeps none", ann: map[string]string{limit: "0"}, want: recordRetention{hasLimit: true}, ok: true},
		{name: "both", ann: map[string]string{ttl: "1m", limit: "3"}, want: recordRetention{ttl: time.Minute, hasLimit: true, limit: 3}, ok: true},
		{name: "no unit", ann: map[string]string{ttl: "720"}, ok: true, wantErr: "is not a duration from 1m to 87600h"},
		{name: "too short", ann: map[string]string{ttl: "59s"}, ok: true, wantErr: "is not a duration"},
		{name: "too long", ann: map[string]string{ttl: "87601h"}, ok: true, wantErr: "is not a duration"},
		{name: "negative limit", ann: map[string]string{limit: "-1"}, ok: true, wantErr: "is not a count from 0 to 100000"},
		{name: "limit not a number", ann: map[string]string{ttl: "1h", limit: "ten"}, ok: true, wantErr: "is not a count"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := parseRecordRetention(tt.ann)
			if ok != tt.ok {
				t.Errorf("ok %v, want %v", ok, tt.ok)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestPlanRecordExpiry(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ended := func(name string, ago time.Duration, edit ...func(*v1alpha1.AgentRun)) v1alpha1.AgentRun {
		run := v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
			Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, StartTime: &metav1.Time{Time: now.Add(-ago - time.Minute)},
				CompletionTime: &metav1.Time{Time: now.Add(-ago)}}}
		for _, e := range edit {
			e(&run)
		}
		return run
	}
	running := v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "team"},
		Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StartTime: &metav1.Time{Time: now.Add(-100 * time.Hour)}}}
	labelled := func(k, v string) func(*v1alpha1.AgentRun) {
		return func(r *v1alpha1.AgentRun) { r.Labels = map[string]string{k: v} }
	}
	budget := func(w v1alpha1.BudgetWindow, sel *v1alpha1.BudgetSelector) v1alpha1.AgentBudget {
		return v1alpha1.AgentBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team"},
			Spec: v1alpha1.AgentBudgetSpec{Window: w, Selector: sel, MaxTokens: ptr.To[int64](1)}}
	}
	for _, tt := range []struct {
		name    string
		r       recordRetention
		runs    []v1alpha1.AgentRun
		budgets []v1alpha1.AgentBudget
		expire  []string
		recheck time.Duration
	}{
		{name: "ttl expires the old, rechecks for the next",
			r:      recordRetention{ttl: 24 * time.Hour},
			runs:   []v1alpha1.AgentRun{ended("old", 25*time.Hour), ended("exactly", 24*time.Hour), ended("young", 2*time.Hour), running},
			expire: []string{"exactly", "old"}, recheck: 22 * time.Hour},
		{name: "history limit keeps the newest by end, name breaks ties",
			r:      recordRetention{hasLimit: true, limit: 2},
			runs:   []v1alpha1.AgentRun{ended("c", 3*time.Hour), ended("a", time.Hour), ended("b", time.Hour), ended("d", 5*time.Hour), running},
			expire: []string{"c", "d"}},
		{name: "limit zero keeps no ended run, never a running one",
			r:      recordRetention{hasLimit: true},
			runs:   []v1alpha1.AgentRun{ended("a", time.Hour), running},
			expire: []string{"a"}},
		{name: "GitOps-tracked runs never expire nor count",
			r: recordRetention{hasLimit: true, limit: 1},
			runs: []v1alpha1.AgentRun{
				ended("argo", time.Minute, labelled("app.kubernetes.io/instance", "app")),
				ended("argo-id", 2*time.Minute, func(r *v1alpha1.AgentRun) {
					r.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "app:agentrun.dev/AgentRun:team/argo-id"}
				}),
				ended("flux", 3*time.Minute, labelled("kustomize.toolkit.fluxcd.io/name", "agents")),
				ended("helm", 4*time.Minute, labelled("helm.toolkit.fluxcd.io/name", "agents")),
				ended("mine", 5*time.Minute), ended("older", 6*time.Minute)},
			expire: []string{"older"}},
		{name: "being deleted, or ended without a completion time, is left alone",
			r: recordRetention{hasLimit: true},
			runs: []v1alpha1.AgentRun{
				ended("deleting", time.Hour, func(r *v1alpha1.AgentRun) { r.DeletionTimestamp = &metav1.Time{Time: now} }),
				ended("no-time", time.Hour, func(r *v1alpha1.AgentRun) { r.Status.CompletionTime = nil })}},
		{name: "a rolling budget window keeps what it counts until the run leaves it",
			r:       recordRetention{ttl: time.Hour},
			runs:    []v1alpha1.AgentRun{ended("counted", 2*time.Hour), ended("left", 30*time.Hour)},
			budgets: []v1alpha1.AgentBudget{budget(v1alpha1.BudgetWindow{Rolling: "24h"}, nil)},
			expire:  []string{"left"}, recheck: 22 * time.Hour},
		{name: "a calendar window keeps its runs until it ends",
			r:       recordRetention{hasLimit: true},
			runs:    []v1alpha1.AgentRun{ended("today", 2*time.Hour), ended("yesterday", 13*time.Hour)},
			budgets: []v1alpha1.AgentBudget{budget(v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay}, nil)},
			expire:  []string{"yesterday"}, recheck: 12 * time.Hour},
		{name: "a budget covering other runs does not keep these",
			r:    recordRetention{hasLimit: true},
			runs: []v1alpha1.AgentRun{ended("mine", time.Hour)},
			budgets: []v1alpha1.AgentBudget{budget(v1alpha1.BudgetWindow{Rolling: "24h"},
				&v1alpha1.BudgetSelector{MatchLabels: map[string]v1alpha1.LabelValue{"team": "other"}})},
			expire: []string{"mine"}},
		{name: "a budget whose window does not parse keeps every run (fail closed)",
			r:       recordRetention{hasLimit: true},
			runs:    []v1alpha1.AgentRun{ended("a", 400*time.Hour)},
			budgets: []v1alpha1.AgentBudget{budget(v1alpha1.BudgetWindow{Calendar: v1alpha1.CalendarDay, TimeZone: "Nowhere/Else"}, nil)}},
		{name: "a budget whose selector does not parse keeps every run (fail closed)",
			r:    recordRetention{hasLimit: true},
			runs: []v1alpha1.AgentRun{ended("a", 400*time.Hour)},
			budgets: []v1alpha1.AgentBudget{budget(v1alpha1.BudgetWindow{Rolling: "1h"},
				&v1alpha1.BudgetSelector{MatchExpressions: []v1alpha1.BudgetSelectorRequirement{{Key: "team", Operator: "Equals"}}})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := planRecordExpiry(tt.r, tt.runs, tt.budgets, now)
			var got []string
			for _, e := range plan.expire {
				if e.why == "" {
					t.Errorf("%s expires without a reason", e.run.Name)
				}
				got = append(got, e.run.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.expire) {
				t.Errorf("expire %q, want %q", got, tt.expire)
			}
			if plan.recheck != tt.recheck {
				t.Errorf("recheck %v, want %v", plan.recheck, tt.recheck)
			}
		})
	}
}
