package controllers

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// Status bounds. An AgentRun must stay far below etcd's 1.5 MiB object
// limit, and lists of many runs are read at once; the event log keeps the
// whole text.
const (
	maxStatusResultBytes = 32 << 10
	maxStatusDetailBytes = 4 << 10
	// maxConditionMessageBytes keeps `kubectl describe` readable; the
	// whole detail is in status.detail.
	maxConditionMessageBytes = 1 << 10
)

// observedPhase is where a run that has not ended is.
func observedPhase(o observation) v1alpha1.Phase {
	switch {
	case o.Job == nil:
		return v1alpha1.PhasePending
	case o.Job.Spec.Suspend != nil && *o.Job.Spec.Suspend:
		return v1alpha1.PhaseQueued
	case containerStarted(o.Pod, podcontract.AgentContainer) != nil:
		return v1alpha1.PhaseRunning
	}
	return v1alpha1.PhasePending
}

// phaseRank orders phases so that status never goes back.
func phaseRank(p v1alpha1.Phase) int {
	switch p {
	case v1alpha1.PhasePending, v1alpha1.PhaseQueued:
		return 1
	case v1alpha1.PhaseRunning:
		return 2
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed:
		return 3
	}
	return 0
}

// isTerminal reports whether status holds a harvested end.
func isTerminal(st v1alpha1.AgentRunStatus) bool { return phaseRank(st.Phase) == 3 }

// computeStatus is the new status of a run from its old status, what was
// observed and the outcome, if any. It never goes back: an ended run keeps
// its status, a running one does not return to pending, and names and
// times once set stay.
//
// An ended run still reports the generation it has seen (spec.stop set
// after the end bumps it, and kstatus reads a stale observedGeneration as
// InProgress), and gets any condition an older manager did not write,
// from its Succeeded condition.
func computeStatus(old v1alpha1.AgentRunStatus, generation int64, o observation, oc *outcome) v1alpha1.AgentRunStatus {
	st := *old.DeepCopy()
	if isTerminal(old) {
		st.ObservedGeneration = generation
		if iso := st.Isolation; iso != nil {
			// A record written before the modes were CamelCase.
			if m, ok := v1alpha1.SandboxModeFromFlag(string(iso.Sandbox)); ok {
				iso.Sandbox = m
			}
			if m, ok := v1alpha1.NetworkModeFromFlag(string(iso.NetworkMode)); ok {
				iso.NetworkMode = m
			}
		}
		st.Conditions = computeConditions(st.Conditions, st, nil, nil, generation, o.Now)
		return st
	}
	st.ObservedGeneration = generation
	if o.Job != nil {
		st.JobName = o.Job.Name
		if st.TraceID == "" {
			st.TraceID = o.Job.Annotations[AnnotationTraceID]
		}
	}
	if o.Pod != nil {
		st.PodName = o.Pod.Name
	}
	if st.StartTime == nil {
		if t := containerStarted(o.Pod, podcontract.AgentContainer); t != nil {
			st.StartTime = t
		}
	}
	phase := observedPhase(o)
	if oc != nil {
		applyOutcome(&st, o, oc)
		phase = v1alpha1.PhaseFailed
		if oc.EndStatus == events.StatusFinished {
			phase = v1alpha1.PhaseSucceeded
		}
	}
	if phaseRank(phase) < phaseRank(st.Phase) {
		phase = st.Phase
	}
	st.Phase = phase
	var rejected *podRejection
	if oc == nil && o.Pod == nil {
		rejected = o.Rejection
	}
	st.Conditions = computeConditions(st.Conditions, st, oc, rejected, generation, o.Now)
	return st
}

// applyOutcome copies the end into status: the summary's fields, completed
// from the event log's end event where the summary was cut.
func applyOutcome(st *v1alpha1.AgentRunStatus, o observation, oc *outcome) {
	st.EndStatus = oc.EndStatus
	st.ExitCode = oc.ExitCode
	st.CompletionTime = &metav1.Time{Time: oc.Completion}
	detail := oc.Detail
	if s := o.Summary; s != nil {
		st.DurationMs = int64Ptr(s.DurationMs)
		st.Usage = statusUsage(s.Usage)
		st.Usage.ByModelTruncated = s.ByModelCut
		st.Result, st.ResultTruncated = s.Result, s.ResultCut
		if s.SessionID != nil {
			st.SessionID = *s.SessionID
		}
		if iso := s.Isolation; iso != nil && !iso.Unavailable {
			st.Isolation = statusIsolation(*iso)
		}
		c := s.Counters
		st.Counters = &v1alpha1.Counters{Tools: int32(c.Tools), ToolErrors: int32(c.ToolErrors), Denials: int32(c.Denials),
			Subagents: int32(c.Subagents), DeniedConnections: int32(c.DeniedConnections)}
		if s.DetailCut && oc.FromSummary {
			detail += " [cut; the whole detail is in the event log]"
		}
		if e := o.LogEnd; e != nil {
			st.Usage = statusUsage(e.Usage)
			st.Result, st.ResultTruncated = e.Result, false
			if e.SessionID != nil {
				st.SessionID = *e.SessionID
			}
			if oc.FromSummary {
				detail = e.Detail
			}
		}
	} else if st.StartTime != nil && !oc.Completion.Before(st.StartTime.Time) {
		st.DurationMs = int64Ptr(oc.Completion.Sub(st.StartTime.Time).Milliseconds())
	}
	if st.Result != nil {
		r, cut := podcontract.CutUTF8(*st.Result, maxStatusResultBytes)
		st.Result, st.ResultTruncated = &r, st.ResultTruncated || cut
	}
	if d, cut := podcontract.CutUTF8(detail, maxStatusDetailBytes); cut {
		detail = d + "…"
	}
	st.Detail = detail
}

// statusIsolation is the runner's report of how the agent ran in the API's
// spelling; nil for a mode the API does not know (a newer runner's), which
// status could not hold.
func statusIsolation(iso podcontract.Isolation) *v1alpha1.Isolation {
	sandbox, ok := v1alpha1.SandboxModeFromFlag(iso.Sandbox)
	network, known := v1alpha1.NetworkModeFromFlag(iso.NetworkMode)
	if !ok || !known {
		return nil
	}
	return &v1alpha1.Isolation{Sandbox: sandbox, NetworkMode: network, NetworkEnforced: iso.NetworkEnforced}
}

// statusUsage is end.usage in status form: cost as a decimal string.
func statusUsage(t events.Totals) *v1alpha1.Usage {
	u := &v1alpha1.Usage{TokenCounts: statusCounts(t.TokenCounts), TotalTokens: totalTokens(t.TokenCounts)}
	if len(t.ByModel) > 0 {
		u.ByModel = make(map[string]v1alpha1.TokenCounts, len(t.ByModel))
		for m, c := range t.ByModel {
			u.ByModel[m] = statusCounts(c)
		}
	}
	return u
}

func statusCounts(c events.TokenCounts) v1alpha1.TokenCounts {
	return v1alpha1.TokenCounts{
		InputTokens: cloneInt64(c.InputTokens), OutputTokens: cloneInt64(c.OutputTokens),
		CacheReadTokens: cloneInt64(c.CacheReadTokens), CacheWriteTokens: cloneInt64(c.CacheWriteTokens),
		CostUSD: costString(c.CostUSD),
	}
}

// costString writes a cost exactly as the float the runtime reported,
// in decimal notation, without rounding; null stays empty.
func costString(c *float64) string {
	if c == nil {
		return ""
	}
	return strconv.FormatFloat(*c, 'f', -1, 64)
}

func totalTokens(c events.TokenCounts) *int64 {
	var n int64
	seen := false
	for _, p := range []*int64{c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheWriteTokens} {
		if p != nil {
			n += *p
			seen = true
		}
	}
	if !seen {
		return nil
	}
	return &n
}
