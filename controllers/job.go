package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/harvest"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/telemetry"
)

// Labels, annotations and the finalizer the controller puts on the Job and
// its Pod.
const (
	// LabelName and LabelUID name the AgentRun a Job or Pod belongs to. The
	// uid tells a new AgentRun from a deleted one of the same name.
	LabelName = "agentrun.dev/name"
	LabelUID  = "agentrun.dev/uid"
	// LabelManagedBy is what the manager's cache selects Jobs and Pods by,
	// so it never holds the cluster's other Pods.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "agentrun"
	// KueueQueueLabel puts a Job in a Kueue queue; such Jobs are created
	// suspended for Kueue to admit.
	KueueQueueLabel = "kueue.x-k8s.io/queue-name"
	// HarvestFinalizer keeps the Pod, and with it the agent's termination
	// message and the event log, until the result is in the AgentRun's
	// status. The Job controller copies it from the Pod template. Package
	// harvest has the way out when no manager will remove it.
	HarvestFinalizer = harvest.Finalizer
)

// Volumes of the Pod; the paths they are mounted at are the Pod contract's
// (package podcontract).
const (
	sharedVolume     = "agentrun"
	workspaceVolume  = "workspace"
	sessionsVolume   = "sessions"
	imagesVolume     = "images"
	upstreamCAVolume = "upstream-ca"
	// promptVolume holds the prompt as a file (--prompt-file): a command
	// line argument, or a variable, is bounded at 128 KiB.
	promptVolume = "prompt"
)

// AnnotationPrompt carries spec.prompt.text on the Pod, from where a
// downward API volume makes it the prompt file; a prompt from a ConfigMap
// or Secret is projected from there.
const AnnotationPrompt = "agentrun.dev/prompt"

// runnerUID is the runner image's non-root user. bubblewrap needs no
// capability as a non-root user (docs/kubernetes/pod-security.md, "What
// bubblewrap needs in a Pod"), and a numeric uid lets the
// kubelet check runAsNonRoot.
const runnerUID = 1000

// deadlineMargin is how far the Job's activeDeadlineSeconds lies beyond
// spec.timeout. The deadline counts from the Job's start, so it covers
// scheduling and pulling the runner image (Node and three CLIs: large),
// the runner's 10 s grace after SIGINT and writing the summary. It is a
// backstop for a runner that does not stop itself.
const deadlineMargin = 10 * time.Minute

// defaultTimeout matches the CRD default, for objects written before the
// default existed or by a client that skipped defaulting.
const defaultTimeout = time.Hour

// terminationGraceSeconds lets the agent end cleanly when the Pod is
// deleted: agentrun passes SIGINT on, waits up to 10 s for the CLI, then
// writes end and the summary.
const terminationGraceSeconds = 30

// JobConfig is what the manager adds to every Job.
type JobConfig struct {
	// RunnerImage is the default image of both containers.
	RunnerImage string
	// PullPolicy of the runner image, unless the AgentRun overrides it.
	PullPolicy corev1.PullPolicy
	// SandboxSeccomp is the agent container's seccomp profile when it runs
	// the bubblewrap sandbox: the chart's Localhost profile, which allows
	// what bubblewrap needs (nodeprofiles). nil means RuntimeDefault, under
	// which the sandbox cannot start: the run then fails as
	// SandboxUnavailable, never silently without a sandbox. Unconfined
	// only when an admin chooses it.
	SandboxSeccomp *corev1.SeccompProfile
	// SandboxAppArmor is the agent container's AppArmor profile with the
	// sandbox (the chart's Localhost agentrun-bwrap on AppArmor nodes);
	// nil leaves the runtime's default.
	SandboxAppArmor *corev1.AppArmorProfile
	// ProgressPort is where the events sidecar serves the live progress
	// (podcontract.DefaultProgressPort when 0).
	ProgressPort int32
	// AgentResources are the agent container's requests and limits when
	// the AgentRun sets none for a resource (the chart's
	// runner.resources), so that a queue such as Kueue counts the run
	// against its quota.
	AgentResources corev1.ResourceRequirements
	// Telemetry exports every run as an OpenTelemetry trace and metrics
	// (the chart's telemetry.otlp values); nil exports nothing.
	Telemetry *Telemetry
}

// JobName is the AgentRun's Job: its own name when that is a valid Job name
// (at most 63 characters, the limit of the job-name label the Job
// controller adds), else a cut name with a hash of the whole one.
func JobName(runName string) string {
	if len(runName) <= 63 {
		return runName
	}
	sum := sha256.Sum256([]byte(runName))
	prefix := strings.TrimRight(runName[:50], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:])[:8]
}

// jobLabels are the labels of the Job and its Pod: the user's, then ours
// (which win).
func jobLabels(run *v1alpha1.AgentRun) map[string]string {
	l := map[string]string{}
	if o := run.Spec.PodOverrides; o != nil {
		for k, v := range o.Labels {
			l[k] = v
		}
	}
	l[LabelName] = labelValue(run.Name)
	l[LabelUID] = string(run.UID)
	l[LabelManagedBy] = ManagedBy
	l["app.kubernetes.io/name"] = "agentrun"
	l["app.kubernetes.io/component"] = "agent"
	return l
}

// labelValue fits a name into a label value (63 characters); longer names
// get the same cut as JobName, so lookups by label stay exact.
func labelValue(name string) string { return JobName(name) }

// BuildJob is the one Job of an AgentRun. It is a pure function of the
// AgentRun and the manager's configuration.
func BuildJob(run *v1alpha1.AgentRun, cfg JobConfig) *batchv1.Job {
	run = run.DeepCopy() // the Job shares no pointer with the AgentRun
	spec := run.Spec
	labels := jobLabels(run)
	annotations := map[string]string{}
	if o := spec.PodOverrides; o != nil {
		for k, v := range o.Annotations {
			annotations[k] = v
		}
	}
	annotations[AnnotationRun] = run.Name
	// Only the manager names a run's trace (computeStatus reads it).
	delete(annotations, AnnotationTraceID)
	if _, id := runTrace(run, cfg.Telemetry); id != "" {
		annotations[AnnotationTraceID] = id
	}
	// The Pod's annotations also carry the prompt text, for the prompt
	// file; the Job's own do not need it.
	podAnnotations := maps.Clone(annotations)
	if t := spec.Prompt.Text; t != nil {
		podAnnotations[AnnotationPrompt] = *t
	}
	timeout := timeoutOf(spec)
	deadline := int64((timeout + deadlineMargin) / time.Second)
	_, queued := labels[KueueQueueLabel]

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        JobName(run.Name),
			Namespace:   run.Namespace,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1alpha1.GroupVersion.String(),
				Kind:               "AgentRun",
				Name:               run.Name,
				UID:                run.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			// An agent run is not idempotent: never retried.
			BackoffLimit:          ptr.To[int32](0),
			Completions:           ptr.To[int32](1),
			Parallelism:           ptr.To[int32](1),
			ActiveDeadlineSeconds: &deadline,
			// Kueue admits a Job by unsuspending it.
			Suspend: ptr.To(queued),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: podAnnotations,
					Finalizers:  []string{HarvestFinalizer},
				},
				Spec: buildPodSpec(run, cfg),
			},
		},
	}
	return job
}

// timeoutOf is spec.timeout in whole seconds (at least one); the CRD
// validates it, so an unparsable value can only come from a client that
// skipped validation and gets the default.
func timeoutOf(spec v1alpha1.AgentRunSpec) time.Duration {
	d, err := time.ParseDuration(spec.Timeout)
	if err != nil || d < time.Second {
		return defaultTimeout
	}
	return d.Truncate(time.Second)
}

func buildPodSpec(run *v1alpha1.AgentRun, cfg JobConfig) corev1.PodSpec {
	spec := run.Spec
	o := spec.PodOverrides
	if o == nil {
		o = &v1alpha1.PodOverrides{}
	}
	image := cfg.RunnerImage
	if o.Image != "" {
		image = o.Image
	}
	pull := cfg.PullPolicy
	if o.ImagePullPolicy != "" {
		pull = o.ImagePullPolicy
	}

	volumes, agentMounts := volumes(spec)
	// spec.env's telemetry variables (which the CRD refuses) would
	// configure the runner's own exporter: they are left out.
	env := []corev1.EnvVar{}
	for _, e := range spec.Env {
		if !telemetry.IsTelemetryVar(e.Name) {
			env = append(env, e)
		}
	}
	// A credential's Secret reaches the runner's own environment only:
	// the sandbox gets a stand-in (--credential), never --pass-env.
	for _, c := range spec.Credentials {
		env = append(env, corev1.EnvVar{Name: c.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: c.ValueFrom.SecretKeyRef.DeepCopy()}})
	}

	// After spec.env, so that these win (the CRD refuses them there).
	env = append(env, telemetryEnv(run, cfg.Telemetry)...)

	flags := RunFlags(spec)
	flags.NewTraceID = newTraceID(run, cfg.Telemetry)
	flags.GitFlags = gitFlags(run)
	if g := spec.Git; g != nil && g.Credential != nil {
		// The runner's environment only: it clones and pushes with it,
		// and its proxy attaches it to the agent's fetches of the
		// repository; the agent gets none of it.
		env = append(env, corev1.EnvVar{Name: podcontract.GitTokenEnv,
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: g.Credential.SecretKeyRef.DeepCopy()}})
	}
	agent := corev1.Container{
		Name:                     podcontract.AgentContainer,
		Image:                    image,
		ImagePullPolicy:          pull,
		Command:                  []string{"agentrun"},
		Args:                     agentArgs(flags),
		Env:                      env,
		EnvFrom:                  spec.EnvFrom,
		WorkingDir:               podcontract.WorkspaceDir,
		VolumeMounts:             agentMounts,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          agentSecurityContext(spec, cfg),
	}
	agent.Resources = agentResources(cfg.AgentResources, o.Resources)

	events := corev1.Container{
		Name:            podcontract.EventsContainer,
		Image:           image,
		ImagePullPolicy: pull,
		Command:         []string{"agentrun"},
		Args:            sidecarArgs(spec, progressPort(cfg)),
		Ports:           []corev1.ContainerPort{{Name: podcontract.ProgressPortName, ContainerPort: progressPort(cfg), Protocol: corev1.ProtocolTCP}},
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		VolumeMounts:    []corev1.VolumeMount{{Name: sharedVolume, MountPath: podcontract.SharedDir, ReadOnly: true}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("16Mi"),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}

	sidecars := []corev1.Container{events}
	if flags.PatchFile != "" {
		patch := events
		patch.Name = podcontract.PatchContainer
		patch.Args = patchArgs()
		patch.Ports = nil
		patch.Resources = *events.Resources.DeepCopy()
		patch.SecurityContext = events.SecurityContext.DeepCopy()
		sidecars = append(sidecars, patch)
	}

	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		InitContainers:                sidecars,
		Containers:                    []corev1.Container{agent},
		Volumes:                       volumes,
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		ServiceAccountName:            o.ServiceAccountName,
		NodeSelector:                  o.NodeSelector,
		Tolerations:                   o.Tolerations,
		Affinity:                      o.Affinity,
		PriorityClassName:             o.PriorityClassName,
		RuntimeClassName:              o.RuntimeClassName,
		ImagePullSecrets:              o.ImagePullSecrets,
		TerminationGracePeriodSeconds: ptr.To[int64](terminationGraceSeconds),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true),
			RunAsUser:    ptr.To[int64](runnerUID),
			RunAsGroup:   ptr.To[int64](runnerUID),
			FSGroup:      ptr.To[int64](runnerUID),
		},
	}
}

func progressPort(cfg JobConfig) int32 {
	if cfg.ProgressPort > 0 {
		return cfg.ProgressPort
	}
	return podcontract.DefaultProgressPort
}

// sidecarArgs are the events container's arguments. The meter file exists
// only for runs with credentials (the runner's filter proxy meters their
// model calls).
func sidecarArgs(spec v1alpha1.AgentRunSpec, port int32) []string {
	f := podcontract.TailFlags{
		// After end, wait for the kubelet's SIGTERM (sent when the agent
		// container exits) instead of exiting at once, which would make
		// the kubelet restart the sidecar and replay the log.
		Linger: 60 * time.Second,
		// The live progress the manager reads (docs/kubernetes/live-usage.md).
		ProgressAddr: ":" + strconv.Itoa(int(port)),
		File:         podcontract.EventsFile,
	}
	if len(spec.Credentials) > 0 {
		f.MeterFile = podcontract.MeterFile
	}
	return f.Args()
}

// patchArgs are the patch container's arguments: after the end event it
// writes the run's patch to its log, which the manager keeps in the run's
// ConfigMap (package sidecar/patchlog).
func patchArgs() []string {
	return podcontract.TailFlags{
		// As the events sidecar: a sidecar that exits early is restarted.
		Linger:    60 * time.Second,
		PatchFile: podcontract.PatchFile,
		File:      podcontract.EventsFile,
	}.Args()
}

// gitFlags are the runner's --repo flags for spec.git (docs/git.md): the
// token from podcontract.GitTokenEnv, the run's own branch unless the spec
// names one, and the patch where the patch container finds it.
func gitFlags(run *v1alpha1.AgentRun) podcontract.GitFlags {
	g := run.Spec.Git
	if g == nil {
		return podcontract.GitFlags{}
	}
	f := podcontract.GitFlags{
		Repo: g.Repository, Ref: g.Ref, Depth: podcontract.DefaultGitDepth,
		Submodules: g.Submodules, GitPlainHTTP: g.PlainHTTP,
		Push: podcontract.DefaultPush, PushWhen: podcontract.DefaultPushWhen,
	}
	if g.Depth != nil {
		f.Depth = int(*g.Depth)
	}
	if c := g.Credential; c != nil {
		f.GitCredential = podcontract.GitTokenEnv
		f.GitAuth = gitAuthFlag(c)
	}
	push := g.Push
	if push == nil {
		push = &v1alpha1.GitPush{}
	}
	if push.When == v1alpha1.PushWhenAlways {
		f.PushWhen = "always"
	}
	switch push.Mode {
	case v1alpha1.PushNone:
		f.Push = "none"
	case v1alpha1.PushBranch:
		f.Push = "branch"
		f.Branch = push.Branch
		if f.Branch == "" {
			f.Branch = DefaultGitBranch(run)
		}
	default:
		f.Push = "patch"
		f.PatchFile = podcontract.PatchFile
	}
	return f
}

// gitAuthFlag is --git-auth for a credential: basic with its username
// (the runner's default, x-access-token, when none), or bearer.
func gitAuthFlag(c *v1alpha1.GitCredential) string {
	switch {
	case c.Auth == v1alpha1.GitAuthBearer:
		return "bearer"
	case c.Username != "":
		return "basic:" + c.Username
	}
	return ""
}

// DefaultGitBranch is a run's branch when spec.git.push.branch is empty:
// agentrun/<name>-<the first 8 characters of its uid>, so a run of the
// same name again gets a branch of its own.
func DefaultGitBranch(run *v1alpha1.AgentRun) string {
	uid := string(run.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return "agentrun/" + run.Name + "-" + uid
}

// agentResources are the run's own resources where it sets them, and the
// manager's defaults for the rest. A default request above the run's own
// limit is left out (the API server then requests the limit), and so is a
// default limit below the run's own request: either would make the Pod
// invalid.
func agentResources(defaults corev1.ResourceRequirements, own *corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *defaults.DeepCopy()
	if own == nil {
		return out
	}
	own = own.DeepCopy()
	for name, q := range own.Limits {
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits[name] = q
		if r, ok := out.Requests[name]; ok && r.Cmp(q) > 0 {
			delete(out.Requests, name)
		}
	}
	for name, q := range own.Requests {
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[name] = q
		if l, ok := out.Limits[name]; ok && q.Cmp(l) > 0 {
			if _, own := own.Limits[name]; !own {
				delete(out.Limits, name) // a default limit below the run's own request
			}
		}
	}
	out.Claims = own.Claims
	if len(out.Requests) == 0 {
		out.Requests = nil
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	return out
}

// agentSecurityContext is what bubblewrap needs and nothing more
// (docs/kubernetes/pod-security.md, "What bubblewrap needs in a Pod"):
// non-root, no privilege escalation, no capabilities, and the
// manager's seccomp and AppArmor profiles for the sandbox, which allow its
// namespace and mount calls. Without the sandbox the agent keeps the
// runtime's default profiles. An AgentRun's podOverrides choose otherwise
// (an admin's policy can forbid that).
func agentSecurityContext(spec v1alpha1.AgentRunSpec, cfg JobConfig) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(true),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if spec.SandboxOrDefault() == v1alpha1.SandboxBubblewrap {
		if cfg.SandboxSeccomp != nil {
			sc.SeccompProfile = cfg.SandboxSeccomp.DeepCopy()
		}
		if cfg.SandboxAppArmor != nil {
			sc.AppArmorProfile = cfg.SandboxAppArmor.DeepCopy()
		}
	}
	if o := spec.PodOverrides; o != nil {
		if o.SeccompProfile != nil {
			sc.SeccompProfile = o.SeccompProfile.DeepCopy()
		}
		if o.AppArmorProfile != nil {
			sc.AppArmorProfile = o.AppArmorProfile.DeepCopy()
		}
	}
	return sc
}

func volumes(spec v1alpha1.AgentRunSpec) ([]corev1.Volume, []corev1.VolumeMount) {
	vols := []corev1.Volume{{Name: sharedVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	mounts := []corev1.VolumeMount{{Name: sharedVolume, MountPath: podcontract.SharedDir}}

	ws := corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	wsMount := corev1.VolumeMount{Name: workspaceVolume, MountPath: podcontract.WorkspaceDir}
	if w := spec.Workspace; w != nil {
		if w.ClaimName != "" {
			ws.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: w.ClaimName}}
			wsMount.SubPath = w.SubPath
		} else if w.SizeLimit != nil {
			ws.EmptyDir.SizeLimit = w.SizeLimit
		}
	}
	vols = append(vols, ws)
	mounts = append(mounts, wsMount)

	if s := spec.Session; s != nil && s.ClaimName != "" {
		vols = append(vols, corev1.Volume{Name: sessionsVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.ClaimName}}})
		mounts = append(mounts, corev1.VolumeMount{Name: sessionsVolume, MountPath: podcontract.SessionsDir})
	}

	if ca := spec.UpstreamCA; ca != nil {
		vols = append(vols, corev1.Volume{Name: upstreamCAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: ca.LocalObjectReference, Items: []corev1.KeyToPath{{Key: ca.Key, Path: path.Base(podcontract.UpstreamCAFile)}}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: upstreamCAVolume, MountPath: podcontract.UpstreamCADir, ReadOnly: true})
	}

	vols = append(vols, promptSource(spec.Prompt))
	mounts = append(mounts, corev1.VolumeMount{Name: promptVolume, MountPath: podcontract.PromptDir, ReadOnly: true})

	var sources []corev1.VolumeProjection
	for i, img := range spec.Images {
		switch {
		case img.ConfigMapKeyRef != nil:
			sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: img.ConfigMapKeyRef.Name},
				Items:                []corev1.KeyToPath{{Key: img.ConfigMapKeyRef.Key, Path: imageFile(i, img.ConfigMapKeyRef.Key)}},
			}})
		case img.SecretKeyRef != nil:
			sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: img.SecretKeyRef.Name},
				Items:                []corev1.KeyToPath{{Key: img.SecretKeyRef.Key, Path: imageFile(i, img.SecretKeyRef.Key)}},
			}})
		}
	}
	if len(sources) > 0 {
		vols = append(vols, corev1.Volume{Name: imagesVolume, VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: sources}}})
		mounts = append(mounts, corev1.VolumeMount{Name: imagesVolume, MountPath: podcontract.ImagesDir, ReadOnly: true})
	}
	return vols, mounts
}

// promptSource is the volume that holds the prompt file: the text from the
// Pod's annotation, or the ConfigMap or Secret key.
func promptSource(p v1alpha1.PromptSource) corev1.Volume {
	file := path.Base(podcontract.PromptFile)
	v := corev1.Volume{Name: promptVolume}
	switch {
	case p.ConfigMapKeyRef != nil:
		v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: p.ConfigMapKeyRef.LocalObjectReference,
			Items: []corev1.KeyToPath{{Key: p.ConfigMapKeyRef.Key, Path: file}}, Optional: p.ConfigMapKeyRef.Optional}
	case p.SecretKeyRef != nil:
		v.Secret = &corev1.SecretVolumeSource{SecretName: p.SecretKeyRef.Name,
			Items: []corev1.KeyToPath{{Key: p.SecretKeyRef.Key, Path: file}}, Optional: p.SecretKeyRef.Optional}
	default:
		v.DownwardAPI = &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: file,
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationPrompt + "']"}}}}
	}
	return v
}

// imageFile keeps the key (and so its extension) under a directory per
// position, so two images with the same key do not collide.
func imageFile(i int, key string) string { return strconv.Itoa(i) + "/" + key }

// AgentArgs are the arguments of `agentrun` in the agent container: the
// runner's flags (podcontract.RunFlags) made from the spec. Secrets never
// appear here: API keys reach the runner as environment variables from
// Secret references, and the prompt is a file (--prompt-file). The kubelet
// expands $(NAME) in every argument, so literal values escape "$" as "$$".
func AgentArgs(spec v1alpha1.AgentRunSpec) []string { return agentArgs(RunFlags(spec)) }

// agentArgs renders f, escaped for the kubelet.
func agentArgs(f podcontract.RunFlags) []string {
	a := f.Args()
	for i := range a {
		a[i] = literal(a[i])
	}
	return a
}

// RunFlags is the runner's command line for spec (AgentArgs escapes it for
// the kubelet).
func RunFlags(spec v1alpha1.AgentRunSpec) podcontract.RunFlags {
	network := spec.NetworkOrDefault()
	f := podcontract.RunFlags{
		Runtime:     string(spec.Runtime),
		Model:       spec.Model,
		Format:      "jsonl",
		EventsPath:  podcontract.EventsFile,
		SummaryPath: podcontract.TerminationMessageFile,
		RawPath:     podcontract.RawFile,
		Cwd:         podcontract.WorkspaceDir,
		Timeout:     timeoutOf(spec),
		NoSubagents: spec.Subagents != nil && !*spec.Subagents,
		PromptFile:  podcontract.PromptFile,
		InPod:       true,
		SandboxFlags: podcontract.SandboxFlags{
			Sandbox: spec.SandboxOrDefault().Flag(),
			Network: network.Mode.Flag(),
			// The workspace's .git stays writable in a Pod: no git on a
			// host runs in it afterwards (the reason .git is read-only by
			// default on a machine), and agents commit there.
			WritableGit: true,
			AllowHosts:  network.AllowHosts,
			DenyRead:    spec.DenyRead,
		},
	}
	if l := spec.Limits; l != nil {
		if l.MaxTurns != nil {
			f.MaxTurns = int(*l.MaxTurns)
		}
		if l.MaxTokens != nil {
			f.MaxTokens = *l.MaxTokens
		}
	}
	for _, h := range network.AddHosts {
		f.AddHosts = append(f.AddHosts, h.Name+"="+h.IP)
	}
	// The sandbox gives the agent a minimal environment; --pass-env names
	// the container's variables (the Secret references of spec.env and
	// spec.envFrom) that it passes on. Names only: values never appear
	// in the arguments.
	for _, e := range spec.Env {
		if telemetry.IsTelemetryVar(e.Name) {
			continue // never the agent's (the CRD refuses them, the runner too)
		}
		f.PassEnv = append(f.PassEnv, e.Name)
	}
	for _, e := range spec.EnvFrom {
		f.PassEnv = append(f.PassEnv, e.Prefix+"*")
	}
	// The real value stays with the runner (its environment holds the
	// Secret); the agent gets a stand-in, which the proxy swaps for it on
	// the way to these hosts.
	for _, c := range spec.Credentials {
		f.Credentials = append(f.Credentials, c.Name+"="+strings.Join(c.Hosts, ","))
	}
	if spec.UpstreamCA != nil {
		f.UpstreamCA = podcontract.UpstreamCAFile
	}
	if len(spec.Credentials) > 0 {
		// The proxy's meter, live: the events sidecar serves it with the
		// progress, so budgets see what the agent's CLI cannot
		// under-report.
		f.MeterFile = podcontract.MeterFile
	}
	if s := spec.Session; s != nil && s.ClaimName != "" {
		f.SessionDir = podcontract.SessionsDir
		f.Resume = s.Resume
	}
	for i, img := range spec.Images {
		switch {
		case img.Path != nil:
			f.Images = append(f.Images, path.Join(podcontract.WorkspaceDir, *img.Path))
		case img.ConfigMapKeyRef != nil:
			f.Images = append(f.Images, path.Join(podcontract.ImagesDir, imageFile(i, img.ConfigMapKeyRef.Key)))
		case img.SecretKeyRef != nil:
			f.Images = append(f.Images, path.Join(podcontract.ImagesDir, imageFile(i, img.SecretKeyRef.Key)))
		}
	}
	return f
}

// literal escapes a value for the kubelet's $(NAME) expansion.
func literal(s string) string { return strings.ReplaceAll(s, "$", "$$") }
