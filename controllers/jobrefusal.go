package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// Retries of a refused Job: the wait grows with how long the refusal has
// lasted (about doubling each time), so a quota freed a moment later is
// seen at once and a long refusal costs a request a minute.
const (
	minJobRetry = time.Second
	maxJobRetry = time.Minute
)

// jobRetry is the wait before the next try of a Job refused for elapsed.
func jobRetry(elapsed time.Duration) time.Duration {
	return min(max(elapsed, minJobRetry), maxJobRetry)
}

// jobRefusalIsFinal reports whether the API server's refusal of a Job
// create will be the same however often it is asked: the Job is invalid
// (422), malformed (400), too large (413) or of a kind it does not take
// (405, 406, 415), or its namespace is being deleted. Everything else may
// pass: a quota (403) is freed, a webhook or policy (403, or 500 when it
// fails) is fixed or comes back, the manager's permissions are granted,
// an overloaded server (429, 503, 504) recovers, a connection comes back.
func jobRefusalIsFinal(err error) bool {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		return true
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return true
	}
	return false
}

// jobRefusedSince is when the refusal began: the time the Stalled
// condition turned to JobRefused, or now for a first refusal.
func jobRefusedSince(st v1alpha1.AgentRunStatus, now time.Time) time.Time {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonJobRefused && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return now
}
