package controllers

import (
	"context"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

// LiveIntervals bound how often the live progress of one run is written to
// its status: API-server load is at most one status write per running run
// per Usage interval while model calls end, and per Progress interval
// while only its activity moves. A write that happens anyway (a phase
// change, the end) always takes the latest progress along.
type LiveIntervals struct {
	// Usage is the least time between two writes of new usage (a model
	// call ended). The first usage after a quiet spell is written at once.
	Usage time.Duration
	// Progress is the least time between two writes that change only
	// the counters and the progress (tool calls, activity).
	Progress time.Duration
}

// DefaultLiveIntervals keep a model call's usage in status within seconds
// of the call (docs/kubernetes/live-usage.md),
// at one write per run per 5 s at most.
var DefaultLiveIntervals = LiveIntervals{Usage: 5 * time.Second, Progress: 30 * time.Second}

// maxActivityBytes bounds status.progress.activity.
const maxActivityBytes = 256

// reconcileLive makes sure a running run's Pod is polled for its live
// progress; the status write (completeStatus) takes the document in.
func (r *AgentRunReconciler) reconcileLive(_ context.Context, s *scope) error {
	if r.Live == nil || s.outcome != nil {
		return nil
	}
	if observedPhase(s.obs) != v1alpha1.PhaseRunning {
		return nil
	}
	if url := progressURL(s.obs.Pod); url != "" {
		r.Live.Watch(s.run, url)
	}
	return nil
}

// completeStatus adds to the computed status what the pure status
// functions do not know: a budget's hold, the live progress (rate limited
// per run) and cost estimates from the price table.
func (r *AgentRunReconciler) completeStatus(s *scope, old, st v1alpha1.AgentRunStatus) v1alpha1.AgentRunStatus {
	if s.hold != nil {
		st = applyHold(st, *s.hold, s.run.Generation, s.obs.Now)
	}
	if isTerminal(old) {
		return st
	}
	st.Usage = estimateCost(st.Usage, r.Prices)
	if r.Live == nil {
		return st
	}
	doc, written := r.Live.latest(s.run.UID)
	if doc == nil || doc.Cursor() == written.cursor || emptyDoc(doc) {
		return st
	}
	switch {
	case isTerminal(st):
		// The end's usage and counters came with the outcome; what the
		// agent did last is only here.
		st.Progress = liveProgress(doc)
		s.liveWrite = &liveWritten{cursor: doc.Cursor(), at: time.Now()}
	case st.Phase == v1alpha1.PhaseRunning:
		cand := applyLive(st, doc)
		cand.Usage = estimateCost(cand.Usage, r.Prices)
		key := usageKey(cand.Usage)
		interval := r.intervals().Progress
		if key != written.usage {
			interval = r.intervals().Usage
		}
		// The intervals bound API load, in the wall clock's time (the
		// reconciler's injected clock is the runs' time: graces, TTLs).
		now := time.Now()
		due := written.at.Add(interval)
		if !equality.Semantic.DeepEqual(old, st) || !now.Before(due) {
			st = cand
			s.liveWrite = &liveWritten{cursor: doc.Cursor(), usage: key, at: now}
		} else {
			s.requeueAfter(due.Sub(now))
		}
	}
	return st
}

func (r *AgentRunReconciler) intervals() LiveIntervals {
	if r.LiveIntervals == (LiveIntervals{}) {
		return DefaultLiveIntervals
	}
	return r.LiveIntervals
}

// statusWritten records what the status write (or the decision that none
// was needed) means for the live reader and the spend metrics.
func (r *AgentRunReconciler) statusWritten(s *scope, old, st v1alpha1.AgentRunStatus) {
	run := s.run
	r.spend().account(run, old.Usage, st.Usage)
	if r.Live == nil {
		return
	}
	if s.liveWrite != nil {
		r.Live.noteWritten(run.UID, *s.liveWrite)
	}
	if isTerminal(st) {
		r.Live.Forget(run.UID)
	}
}

// applyLive is a running run's status with the live document's usage,
// counters and progress. It is a pure function.
func applyLive(st v1alpha1.AgentRunStatus, d *progress.Doc) v1alpha1.AgentRunStatus {
	st = *st.DeepCopy()
	if d.Usage.ByModel != nil || !d.Usage.TokenCounts.IsZero() {
		st.Usage = statusUsage(d.Usage)
		st.Usage.ByModelTruncated = st.Usage.ByModelTruncated || d.ByModelCut
	}
	st.Counters = statusCounters(d.Counters)
	st.Progress = liveProgress(d)
	return st
}

// liveProgress is status.progress from a document.
func liveProgress(d *progress.Doc) *v1alpha1.Progress {
	p := &v1alpha1.Progress{ModelCalls: d.ModelCalls, ToolCalls: d.ToolCalls}
	p.Activity, _ = podcontract.CutUTF8(d.Activity, maxActivityBytes)
	if t := d.LastEventTime(); !t.IsZero() {
		mt := metav1.NewTime(t.Truncate(time.Second)) // what status keeps of it
		p.LastEventTime = &mt
	}
	if m := d.Meter; m != nil {
		p.MeteredTokens = int64Ptr(m.Total())
		if m.Unmetered > 0 {
			p.UnmeteredCalls = int64Ptr(m.Unmetered)
		}
	}
	return p
}

// emptyDoc: the agent has done nothing yet worth a status write (the
// stream has only its start and prompt).
func emptyDoc(d *progress.Doc) bool {
	return d.ModelCalls == 0 && d.ToolCalls == 0 && d.Usage.TokenCounts.IsZero() && d.Counters == (events.Counters{}) && !d.Ended
}

// usageKey tells two usages apart.
func usageKey(u *v1alpha1.Usage) string {
	b, _ := json.Marshal(u)
	return string(b)
}
