package controllers

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// maxSessionIDBytes is the API's bound of status.sessionID.
	maxSessionIDBytes = 256
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
	var stalled *stall
	switch {
	case oc != nil || o.Pod != nil:
	case o.JobRefusal != nil && o.Job == nil:
		stalled = &stall{Reason: v1alpha1.ReasonJobRefused, Message: "the API server refuses to create the run's Job (retrying): " + o.JobRefusal.Message}
	case o.Rejection != nil:
		stalled = &stall{Reason: v1alpha1.ReasonPodRejected, Message: "the Job cannot create the run's Pod: " + o.Rejection.Message}
	}
	st.Conditions = computeConditions(st.Conditions, st, oc, stalled, generation, o.Now)
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
		st.Usage.ByModelTruncated = st.Usage.ByModelTruncated || s.ByModelCut
		st.Result, st.ResultTruncated = s.Result, s.ResultCut
		st.SessionID = statusSessionID(s.SessionID)
		if iso := s.Isolation; iso != nil && !iso.Unavailable {
			st.Isolation = statusIsolation(*iso)
		}
		st.Git = statusGit(endGit(o), o.Patch)
		st.Counters = statusCounters(s.Counters)
		if s.DetailCut && oc.FromSummary {
			detail += " [cut; the whole detail is in the event log]"
		}
		if e := o.LogEnd; e != nil {
			st.Usage = statusUsage(e.Usage)
			st.Result, st.ResultTruncated = e.Result, false
			if e.SessionID != nil {
				st.SessionID = statusSessionID(e.SessionID)
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

// statusSessionID is a session id status can hold; "" for one longer than
// the API allows (a cut id resumes nothing).
func statusSessionID(id *string) string {
	if id == nil || len(*id) > maxSessionIDBytes || !utf8.ValidString(*id) {
		return ""
	}
	return *id
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

// statusUsage is end.usage in status form: cost as a decimal string, and
// the by-model split bounded (the agent names its models): models whose
// name status cannot hold are left out, then all but the MaxByModel
// largest, and ByModelTruncated says so. The totals stay whole.
func statusUsage(t events.Totals) *v1alpha1.Usage {
	u := &v1alpha1.Usage{TokenCounts: statusCounts(t.TokenCounts), TotalTokens: t.TokenCounts.Total()}
	named := events.Totals{TokenCounts: t.TokenCounts, ByModel: make(map[string]events.TokenCounts, min(len(t.ByModel), v1alpha1.MaxByModel))}
	for m, c := range t.ByModel {
		if m == "" || len(m) > v1alpha1.MaxModelNameBytes || !utf8.ValidString(m) {
			u.ByModelTruncated = true
			continue
		}
		named.ByModel[m] = c
	}
	kept, cut := named.Bounded(v1alpha1.MaxByModel)
	u.ByModelTruncated = u.ByModelTruncated || cut
	if len(kept.ByModel) > 0 {
		u.ByModel = make(map[string]v1alpha1.TokenCounts, len(kept.ByModel))
		for m, c := range kept.ByModel {
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

// statusCounters is the counters in status form (events.Counters counts
// them, from the end summary or the live progress alike).
func statusCounters(c events.Counters) *v1alpha1.Counters {
	return &v1alpha1.Counters{Tools: count32(c.Tools), ToolErrors: count32(c.ToolErrors), Denials: count32(c.Denials),
		Subagents: count32(c.Subagents), DeniedConnections: count32(c.DeniedConnections)}
}

// count32 is a count in status's int32, held at its largest value rather
// than wrapped.
func count32(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// maxTrimmedTextBytes bounds the detail and the condition messages of a
// trimmed status.
const maxTrimmedTextBytes = 256

// trimStatus is the status to write when the API server refused the whole
// one as too large (an AgentRun whose spec or metadata leaves little room
// under the object size limit): the end, the totals, the counters, names
// and times stay, and what only the event log needs in full goes (the
// result, the by-model split, the activity, the labels at the end), each
// marked where the API has a mark. A pure function.
func trimStatus(st v1alpha1.AgentRunStatus) v1alpha1.AgentRunStatus {
	st = *st.DeepCopy()
	if st.Result != nil {
		st.Result, st.ResultTruncated = nil, true
	}
	if u := st.Usage; u != nil && len(u.ByModel) > 0 {
		u.ByModel, u.ByModelTruncated = nil, true
	}
	if p := st.Progress; p != nil {
		p.Activity = ""
	}
	// A run with many labels would otherwise carry them twice; budgets
	// then count it by its labels of the moment.
	st.LabelsAtEnd = nil
	st.Detail = cutText(st.Detail, maxTrimmedTextBytes)
	for i := range st.Conditions {
		st.Conditions[i].Message = cutText(st.Conditions[i].Message, maxTrimmedTextBytes)
	}
	return st
}

// cutText cuts s to n bytes at a character boundary, marked with "…".
func cutText(s string, n int) string {
	if c, cut := podcontract.CutUTF8(s, n); cut {
		return c + "…"
	}
	return s
}

// tooLarge reports whether the API server refused a write for its size:
// 413 RequestEntityTooLarge, or etcd's own limit ("etcdserver: request is
// too large"), which reaches the client as an internal error.
func tooLarge(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) || (err != nil && strings.Contains(err.Error(), "request is too large"))
}
