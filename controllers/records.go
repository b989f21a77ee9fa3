package controllers

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// recordRetention is a namespace's opt-in to records that expire
// (v1alpha1.AnnotationRecordsTTLAfterEnd and ...HistoryLimit).
type recordRetention struct {
	ttl      time.Duration // 0: no TTL
	hasLimit bool
	limit    int
}

// Bounds of the annotations' values: past them a typo (87600 with no unit
// is refused anyway; 1s would empty the namespace as runs end) is more
// likely than an intent.
const (
	minRecordsTTL   = time.Minute
	maxRecordsTTL   = 87600 * time.Hour
	maxRecordsLimit = 100000
)

// parseRecordRetention reads a Namespace's annotations. ok is false when
// neither is set (the default: every record stays). A value that does not
// parse is an error, and nothing expires until it is fixed: a record
// deleted by mistake cannot come back.
func parseRecordRetention(annotations map[string]string) (r recordRetention, ok bool, err error) {
	ttl, hasTTL := annotations[v1alpha1.AnnotationRecordsTTLAfterEnd]
	limit, hasLimit := annotations[v1alpha1.AnnotationRecordsHistoryLimit]
	if !hasTTL && !hasLimit {
		return r, false, nil
	}
	if hasTTL {
		d, perr := time.ParseDuration(strings.TrimSpace(ttl))
		if perr != nil || d < minRecordsTTL || d > maxRecordsTTL {
			return r, true, fmt.Errorf("annotation %s=%q is not a duration from 1m to 87600h, such as 720h", v1alpha1.AnnotationRecordsTTLAfterEnd, ttl)
		}
		r.ttl = d
	}
	if hasLimit {
		n, perr := strconv.Atoi(strings.TrimSpace(limit))
		if perr != nil || n < 0 || n > maxRecordsLimit {
			return r, true, fmt.Errorf("annotation %s=%q is not a count from 0 to %d, such as 100", v1alpha1.AnnotationRecordsHistoryLimit, limit, maxRecordsLimit)
		}
		r.hasLimit, r.limit = true, n
	}
	return r, true, nil
}

// gitOpsTracking are the labels and annotations by which Argo CD (label
// or annotation tracking, and the instance label of its older default) and
// Flux (kustomize and helm controllers) mark the objects they apply. A
// tracked AgentRun deleted would be applied again, and run again.
var gitOpsTracking = struct{ labels, annotations []string }{
	labels: []string{"argocd.argoproj.io/instance", "app.kubernetes.io/instance",
		"kustomize.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/name"},
	annotations: []string{"argocd.argoproj.io/tracking-id"},
}

// trackedBy names the GitOps mark a run carries, or "".
func trackedBy(run *v1alpha1.AgentRun) string {
	for _, k := range gitOpsTracking.labels {
		if _, ok := run.Labels[k]; ok {
			return "label " + k
		}
	}
	for _, k := range gitOpsTracking.annotations {
		if _, ok := run.Annotations[k]; ok {
			return "annotation " + k
		}
	}
	return ""
}

// expiredRecord is one run to delete and why.
type expiredRecord struct {
	run *v1alpha1.AgentRun
	why string
}

// recordPlan is what a namespace's records need now: the runs to delete,
// and when to look again (0: only when a run ends).
type recordPlan struct {
	expire  []expiredRecord
	recheck time.Duration
}

// planRecordExpiry decides which of a namespace's ended runs expire under
// r at now. A run is a candidate once its end is in status (phase
// Succeeded or Failed, completionTime set) and it is not being deleted;
// one a GitOps tool tracks never is. The history limit keeps the newest
// candidates by their end (the name breaks ties); the TTL expires those
// whose end is older. A run an AgentBudget of the namespace counts in its
// current window is kept until the window has moved past it (a budget
// whose window or selector does not parse keeps every run it may cover:
// fail closed). It is a pure function.
func planRecordExpiry(r recordRetention, runs []v1alpha1.AgentRun, budgets []v1alpha1.AgentBudget, now time.Time) recordPlan {
	var candidates []*v1alpha1.AgentRun
	for i := range runs {
		run := &runs[i]
		if !isTerminal(run.Status) || run.Status.CompletionTime == nil || !run.DeletionTimestamp.IsZero() || trackedBy(run) != "" {
			continue
		}
		candidates = append(candidates, run)
	}
	slices.SortFunc(candidates, func(a, b *v1alpha1.AgentRun) int {
		return cmp.Or(b.Status.CompletionTime.Compare(a.Status.CompletionTime.Time), cmp.Compare(a.Name, b.Name))
	})

	var plan recordPlan
	var next time.Time
	later := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for i, run := range candidates {
		end := run.Status.CompletionTime.Time
		var why string
		switch {
		case r.hasLimit && i >= r.limit:
			why = fmt.Sprintf("beyond the namespace's history limit of %d ended runs (%s)", r.limit, v1alpha1.AnnotationRecordsHistoryLimit)
		case r.ttl > 0 && !now.Before(end.Add(r.ttl)):
			why = fmt.Sprintf("ended %s ago, past the namespace's TTL of %s (%s)", now.Sub(end).Round(time.Second), r.ttl, v1alpha1.AnnotationRecordsTTLAfterEnd)
		case r.ttl > 0:
			later(end.Add(r.ttl))
		}
		if why == "" {
			continue
		}
		if until, counted := countedUntil(run, budgets, now); counted {
			// Kept for the budget; it expires once the window moves on
			// (a budget that does not parse: when it is fixed and the
			// next run ends, or at the next look).
			if !until.IsZero() {
				later(until)
			}
			continue
		}
		plan.expire = append(plan.expire, expiredRecord{run: run, why: why})
	}
	if !next.IsZero() {
		plan.recheck = next.Sub(now)
	}
	return plan
}

// countedUntil reports whether a budget of the run's namespace counts the
// run in its current window, and until when (zero: not known, a budget
// that does not parse).
func countedUntil(run *v1alpha1.AgentRun, budgets []v1alpha1.AgentBudget, now time.Time) (until time.Time, counted bool) {
	for i := range budgets {
		b := &budgets[i]
		if !b.Covers(run) {
			continue
		}
		w, err := budgetWindow(b.Spec.Window, now)
		if err != nil {
			return time.Time{}, true
		}
		if b.Spec.Selector != nil {
			if _, serr := b.Spec.Selector.Parse(); serr != nil {
				return time.Time{}, true
			}
		}
		if !counts(run.Status, w) {
			continue
		}
		counted = true
		// The run leaves a rolling window its length after its end, a
		// calendar one when the window ends.
		leaves := w.end
		if leaves.IsZero() {
			leaves = run.Status.CompletionTime.Add(w.length)
		}
		if until.IsZero() || leaves.After(until) {
			until = leaves
		}
	}
	return until, counted
}
