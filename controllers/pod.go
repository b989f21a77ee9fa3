package controllers

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/podcontract"
)

// containerTerminated is the terminated state of a container (regular or
// init) of pod, or nil.
func containerTerminated(pod *corev1.Pod, name string) *corev1.ContainerStateTerminated {
	if cs := containerStatus(pod, name); cs != nil {
		return cs.State.Terminated
	}
	return nil
}

// containerStarted is when a container started, if it has.
func containerStarted(pod *corev1.Pod, name string) *metav1.Time {
	cs := containerStatus(pod, name)
	switch {
	case cs == nil:
		return nil
	case cs.State.Running != nil:
		t := cs.State.Running.StartedAt
		return &t
	case cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero():
		t := cs.State.Terminated.StartedAt
		return &t
	}
	return nil
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	if job == nil {
		return nil
	}
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func firstLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	s, _ = podcontract.CutUTF8(s, n)
	return s
}

func int32Ptr(v int32) *int32 { return &v }

func int64Ptr(v int64) *int64 { return &v }

func cloneInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// hasPatchContainer: the Pod was built with the patch container (spec.git
// push mode Patch).
func hasPatchContainer(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == podcontract.PatchContainer {
			return true
		}
	}
	return false
}
