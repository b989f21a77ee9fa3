package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/patchlog"
)

// PatchKey is the key of the patch in a run's patch ConfigMap: the gzip
// of the mbox `git am` applies.
const PatchKey = "change.patch.gz"

// patchLogLines bounds the lines of the patch container's log read: the
// base64 of patchlog.MaxGzip in 76-character lines, with room.
const patchLogLines = patchlog.MaxLog/76 + 16

// PatchConfigMapName is the name of the ConfigMap that keeps a run's patch
// (spec.git push mode Patch).
func PatchConfigMapName(runName string) string { return JobName(runName) + "-patch" }

// patchKept is what the harvest did with the run's patch.
type patchKept struct {
	// ConfigMap names the ConfigMap that holds it.
	ConfigMap string
	// TooLarge: the patch was over what a ConfigMap holds (gzip bytes).
	TooLarge int64
	// Problem says why the patch is not kept.
	Problem string
}

// endGit is the run's end.git: from the event log when it was read (the
// summary's may be cut), else the summary's; nil for a run without
// spec.git or one that ended before its clone.
func endGit(o observation) *events.Git {
	if o.LogEnd != nil && o.LogEnd.Git != nil {
		return o.LogEnd.Git
	}
	if o.Summary != nil {
		return o.Summary.Git
	}
	return nil
}

// keepPatch reads the patch container's log once that container has
// terminated (bounded by Graces.EventLog after the agent, as the event
// log) and keeps the patch in the run's ConfigMap. It returns false while
// it should wait. A patch that cannot be kept is not an error of the run:
// status.git.detail says why.
func (r *AgentRunReconciler) keepPatch(ctx context.Context, s *scope, pod *corev1.Pod, agent *corev1.ContainerStateTerminated) (bool, error) {
	if containerTerminated(pod, podcontract.PatchContainer) == nil {
		deadline := agent.FinishedAt.Add(r.Graces.EventLog)
		if s.obs.Now.Before(deadline) && pod.DeletionTimestamp == nil {
			s.requeueAfter(min(logPoll, deadline.Sub(s.obs.Now)))
			return false, nil
		}
		s.obs.Patch = &patchKept{Problem: fmt.Sprintf("the patch is not kept: the %s container did not terminate within %s of the agent", podcontract.PatchContainer, r.Graces.EventLog)}
		return true, nil
	}
	if r.Logs == nil {
		s.obs.Patch = &patchKept{Problem: "the patch is not kept: no log reader configured"}
		return true, nil
	}
	b, err := r.Logs.TailLog(ctx, pod.Namespace, pod.Name, podcontract.PatchContainer, patchLogLines, patchlog.MaxLog)
	if err != nil {
		// The API server or the kubelet may be back in a moment, and the
		// harvest finalizer keeps the Pod (and its log) meanwhile.
		if s.obs.Now.Before(agent.FinishedAt.Add(2 * r.Graces.EventLog)) {
			return false, fmt.Errorf("reading the %s container's log: %w", podcontract.PatchContainer, err)
		}
		s.obs.Patch = &patchKept{Problem: fmt.Sprintf("the patch is not kept: reading the %s container's log: %v", podcontract.PatchContainer, err)}
		return true, nil
	}
	p, err := patchlog.Read(b)
	switch {
	case err != nil:
		s.obs.Patch = &patchKept{Problem: "the patch is not kept: " + err.Error()}
	case p.TooLarge > 0:
		s.obs.Patch = &patchKept{TooLarge: p.TooLarge}
	case p.Gzip == nil:
		s.obs.Patch = &patchKept{Problem: "the patch container found no patch"}
	default:
		name, err := r.savePatch(ctx, s.run, p.Gzip, endGit(s.obs))
		var taken errNameTaken
		if errors.As(err, &taken) {
			s.obs.Patch = &patchKept{Problem: "the patch is not kept: " + err.Error()}
			s.events = append(s.events, event{corev1.EventTypeWarning, "PatchNotKept", s.obs.Patch.Problem})
			break
		}
		if err != nil {
			// As for the log: the API server may accept it in a moment,
			// but one that keeps refusing it (a ResourceQuota of the
			// namespace's ConfigMaps, an admission policy) must not hold
			// the run in its harvest forever.
			if s.obs.Now.Before(agent.FinishedAt.Add(2 * r.Graces.EventLog)) {
				return false, fmt.Errorf("keeping the patch in ConfigMap %s: %w", PatchConfigMapName(s.run.Name), err)
			}
			s.obs.Patch = &patchKept{Problem: fmt.Sprintf("the patch is not kept: creating ConfigMap %s: %v", PatchConfigMapName(s.run.Name), err)}
			s.events = append(s.events, event{corev1.EventTypeWarning, "PatchNotKept", s.obs.Patch.Problem})
			break
		}
		s.obs.Patch = &patchKept{ConfigMap: name}
		s.events = append(s.events, event{corev1.EventTypeNormal, "PatchKept", fmt.Sprintf(
			"the agent's change is in ConfigMap %s (%d bytes gzipped): kubectl agentrun diff %s", name, len(p.Gzip), s.run.Name)})
	}
	return true, nil
}

// savePatch creates the run's patch ConfigMap, owned by the AgentRun (the
// garbage collector deletes it with the run) and immutable. One an
// earlier reconcile created is the run's already; one of the same name
// that is not the run's is errNameTaken.
func (r *AgentRunReconciler) savePatch(ctx context.Context, run *v1alpha1.AgentRun, gz []byte, git *events.Git) (string, error) {
	cm := patchConfigMap(run, gz, git)
	err := r.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return cm.Name, err
	}
	old := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}, old); err != nil {
		return "", err
	}
	if !metav1.IsControlledBy(old, run) {
		return "", errNameTaken(cm.Name)
	}
	return cm.Name, nil
}

// errNameTaken is a ConfigMap of the patch's name that is not the run's:
// it is never overwritten or adopted (it may hold anything of anyone's).
type errNameTaken string

func (e errNameTaken) Error() string {
	return fmt.Sprintf("a ConfigMap named %s exists and is not this AgentRun's", string(e))
}

// patchConfigMap is the ConfigMap of a run's patch: binaryData
// change.patch.gz, and what the change is in annotations.
func patchConfigMap(run *v1alpha1.AgentRun, gz []byte, git *events.Git) *corev1.ConfigMap {
	annotations := map[string]string{AnnotationRun: run.Name}
	if git != nil {
		annotations["agentrun.dev/repository"] = git.Repository
		annotations["agentrun.dev/base-commit"] = git.BaseCommit
		annotations["agentrun.dev/head-commit"] = git.HeadCommit
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PatchConfigMapName(run.Name),
			Namespace:   run.Namespace,
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelName: labelValue(run.Name), LabelUID: string(run.UID)},
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun", Name: run.Name, UID: run.UID, Controller: ptr.To(true),
			}},
		},
		Immutable:  ptr.To(true),
		BinaryData: map[string][]byte{PatchKey: gz},
	}
}

// maxStatusGitPaths and maxStatusGitPath bound status.git.paths (the CRD
// refuses more).
const (
	maxStatusGitPaths = 20
	maxStatusGitPath  = 256
)

// statusGit is end.git in status form, with what the harvest did with the
// patch; nil without end.git.
func statusGit(g *events.Git, kept *patchKept) *v1alpha1.GitStatus {
	if g == nil {
		return nil
	}
	st := &v1alpha1.GitStatus{
		Repository: g.Repository, Ref: g.Ref, BaseCommit: g.BaseCommit, HeadCommit: g.HeadCommit,
		Pushed: g.Pushed, Commits: clampInt32(g.Commits), FilesChanged: clampInt32(g.FilesChanged),
		Insertions: clampInt32(g.Insertions), Deletions: clampInt32(g.Deletions),
	}
	if g.Branch != nil {
		st.Branch = *g.Branch
	}
	if g.BaseCommit != g.HeadCommit {
		st.DiffStat = "+" + strconv.Itoa(g.Insertions) + " -" + strconv.Itoa(g.Deletions)
	}
	for _, p := range g.Paths {
		if len(st.Paths) == maxStatusGitPaths {
			break
		}
		if c, cut := podcontract.CutUTF8(p, maxStatusGitPath-len("…")); cut {
			p = c + "…"
		}
		st.Paths = append(st.Paths, p)
	}
	notes := []string{}
	if g.Detail != "" {
		notes = append(notes, g.Detail)
	}
	if kept != nil {
		st.PatchConfigMap = kept.ConfigMap
		if kept.TooLarge > 0 {
			st.PatchTruncated = true
			notes = append(notes, fmt.Sprintf("the patch (%d bytes gzipped) is too large for a ConfigMap and is not kept: run with spec.git.push.mode Branch to get the change", kept.TooLarge))
		}
		if kept.Problem != "" {
			notes = append(notes, kept.Problem)
		}
	}
	detail := strings.Join(notes, "; ")
	if c, cut := podcontract.CutUTF8(detail, maxStatusDetailBytes-len("…")); cut {
		detail = c + "…"
	}
	st.Detail = detail
	return st
}

func clampInt32(n int) int32 {
	switch {
	case n < 0:
		return 0
	case n > 1<<31-1:
		return 1<<31 - 1
	}
	return int32(n)
}
