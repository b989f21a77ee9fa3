package controllers

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// newRun is a minimal AgentRun, as the API server returns it after
// defaulting.
func newRun(name string, edit func(*v1alpha1.AgentRunSpec)) *v1alpha1.AgentRun {
	run := &v1alpha1.AgentRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "0b9ad7a1-6c1e-4d65-9d8e-1f1b0a4d2c77"},
		Spec: v1alpha1.AgentRunSpec{
			Runtime:   v1alpha1.RuntimeClaudeCode,
			Prompt:    v1alpha1.PromptSource{Text: ptr.To("fix the failing test")},
			Timeout:   "1h",
			Subagents: ptr.To(true),
			Sandbox:   v1alpha1.SandboxBubblewrap,
			Network:   &v1alpha1.Network{Mode: v1alpha1.NetworkFull},
		},
	}
	if edit != nil {
		edit(&run.Spec)
	}
	return run
}

// fixed are the arguments every run starts with.
var fixed = []string{"run", "--in-pod", "--runtime", "claude-code", "--format", "jsonl", "--events", "/agentrun/events.jsonl",
	"--summary", "/dev/termination-log", "--raw", "/agentrun/raw.jsonl", "--cwd", "/workspace", "--writable-git"}

func TestAgentArgs(t *testing.T) {
	tests := []struct {
		name string
		edit func(*v1alpha1.AgentRunSpec)
		want []string // after the fixed arguments
	}{
		{"defaults", nil, []string{"--timeout", "3600", "--sandbox", "bubblewrap", "--network", "full", "--prompt-file", "/agentrun-prompt/prompt", "--"}},
		{"everything", func(s *v1alpha1.AgentRunSpec) {
			s.Model = "claude-sonnet-5-5"
			s.Timeout = "90s"
			s.Limits = &v1alpha1.Limits{MaxTurns: ptr.To[int32](7), MaxTokens: ptr.To[int64](100000)}
			s.Subagents = ptr.To(false)
			s.Sandbox = v1alpha1.SandboxNone
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"api.anthropic.com", "*.github.com:443"},
				AddHosts: []v1alpha1.HostAddress{{Name: "gateway.test", IP: "10.0.0.7"}}}
			s.DenyRead = []string{"/etc/secret"}
			s.Env = []corev1.EnvVar{{Name: "ANTHROPIC_API_KEY", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: "anthropic"}}}}
			s.EnvFrom = []corev1.EnvFromSource{{Prefix: "GH_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gh"}}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "all"}}}}
			s.Session = &v1alpha1.Session{ClaimName: "sessions", Resume: "abc-123"}
			s.Images = []v1alpha1.ImageSource{{Path: ptr.To("shots/a.png")},
				{ConfigMapKeyRef: &v1alpha1.KeyRef{Name: "imgs", Key: "b.jpg"}},
				{SecretKeyRef: &v1alpha1.KeyRef{Name: "private", Key: "c.webp"}}}
		}, []string{"--timeout", "90", "--model", "claude-sonnet-5-5", "--max-turns", "7", "--max-tokens", "100000",
			"--no-subagents", "--sandbox", "none", "--network", "custom",
			"--allow-host", "api.anthropic.com", "--allow-host", "*.github.com:443", "--add-host", "gateway.test=10.0.0.7",
			"--deny-read", "/etc/secret", "--pass-env", "ANTHROPIC_API_KEY", "--pass-env", "GH_*", "--pass-env", "*",
			"--session-dir", "/sessions", "--resume", "abc-123",
			"--image", "/workspace/shots/a.png", "--image", "/agentrun-images/1/b.jpg", "--image", "/agentrun-images/2/c.webp",
			"--prompt-file", "/agentrun-prompt/prompt", "--"}},
		{"credentials", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{{Name: "ANTHROPIC_API_KEY", Hosts: []string{"api.anthropic.com:443", "http://gw.internal:8080"},
				ValueFrom: v1alpha1.CredentialSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: "anthropic"}}}}
			s.UpstreamCA = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gw-ca"}, Key: "ca.crt"}
		}, []string{"--timeout", "3600", "--sandbox", "bubblewrap", "--network", "full",
			"--credential", "ANTHROPIC_API_KEY=api.anthropic.com:443,http://gw.internal:8080", "--upstream-ca", "/agentrun-upstream-ca/ca.pem",
			"--meter-file", "/agentrun/meter.json", "--prompt-file", "/agentrun-prompt/prompt", "--"}},
		{"a dollar in a value is not expanded by the kubelet", func(s *v1alpha1.AgentRunSpec) {
			s.Model = "m$(HOME)$"
		}, []string{"--timeout", "3600", "--model", "m$$(HOME)$$", "--sandbox", "bubblewrap", "--network", "full", "--prompt-file", "/agentrun-prompt/prompt", "--"}},
		{"unset defaults", func(s *v1alpha1.AgentRunSpec) {
			s.Timeout, s.Sandbox, s.Network, s.Subagents = "", "", nil, nil
		}, []string{"--timeout", "3600", "--sandbox", "bubblewrap", "--network", "full", "--prompt-file", "/agentrun-prompt/prompt", "--"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AgentArgs(newRun("r", tt.edit).Spec)
			want := append(append([]string{}, fixed...), tt.want...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("AgentArgs:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// expand is the kubelet's $(NAME) expansion, enough to check the escaping.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			if j := strings.IndexByte(s[i:], ')'); j > 0 {
				b.WriteString(env[s[i+2:i+j]])
				i += j
				continue
			}
			b.WriteString("$(")
			i++
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func TestLiteralSurvivesExpansion(t *testing.T) {
	for _, s := range []string{"plain", "$(HOME)", "$$", "$", "a$b", "$(", "end$", "$(A)$(B)$$(C)"} {
		if got := expand(literal(s), map[string]string{"HOME": "/root", "A": "x"}); got != s {
			t.Errorf("expand(literal(%q)) = %q", s, got)
		}
	}
}

func TestJobName(t *testing.T) {
	long := strings.Repeat("a", 60) + ".b-" + strings.Repeat("c", 40)
	tests := []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("x", 63), strings.Repeat("x", 63)},
	}
	for _, tt := range tests {
		if got := JobName(tt.in); got != tt.want {
			t.Errorf("JobName(%q) = %q", tt.in, got)
		}
	}
	got := JobName(long)
	if len(got) > 63 || got != JobName(long) || got == JobName(long+"x") || strings.Contains(got, ".-") {
		t.Errorf("JobName(long) = %q: must be stable, unique and at most 63 characters", got)
	}
}

func TestBuildJob(t *testing.T) {
	run := newRun("review", func(s *v1alpha1.AgentRunSpec) {
		s.PodOverrides = &v1alpha1.PodOverrides{
			Labels:             map[string]string{KueueQueueLabel: "agents", LabelManagedBy: "someone-else"},
			Annotations:        map[string]string{"team": "infra"},
			NodeSelector:       map[string]string{"pool": "agents"},
			Tolerations:        []corev1.Toleration{{Key: "agents", Operator: corev1.TolerationOpExists}},
			ServiceAccountName: "agent",
			Resources:          &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: mustQuantity("2Gi")}},
		}
		s.Workspace = &v1alpha1.Workspace{ClaimName: "repo", SubPath: "src"}
	})
	cfg := chartJobConfig
	cfg.RunnerImage, cfg.PullPolicy = "runner:1", corev1.PullNever
	job := BuildJob(run, cfg)
	spec := job.Spec
	pod := spec.Template.Spec

	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("name", job.Name, "review")
	check("owner", job.OwnerReferences[0].UID, run.UID)
	check("controller", *job.OwnerReferences[0].Controller, true)
	check("backoffLimit", *spec.BackoffLimit, int32(0))
	check("activeDeadlineSeconds", *spec.ActiveDeadlineSeconds, int64(3600+600))
	check("suspend (Kueue label)", *spec.Suspend, true)
	check("managed-by label wins over the user's", job.Labels[LabelManagedBy], ManagedBy)
	check("queue label", job.Labels[KueueQueueLabel], "agents")
	check("pod labels", spec.Template.Labels, job.Labels)
	check("run annotation", spec.Template.Annotations[AnnotationRun], "review")
	check("user annotation", spec.Template.Annotations["team"], "infra")
	check("harvest finalizer", spec.Template.Finalizers, []string{HarvestFinalizer})
	check("restartPolicy", pod.RestartPolicy, corev1.RestartPolicyNever)
	check("automountServiceAccountToken", *pod.AutomountServiceAccountToken, false)
	check("serviceAccountName", pod.ServiceAccountName, "agent")
	check("nodeSelector", pod.NodeSelector, map[string]string{"pool": "agents"})
	check("runAsNonRoot", *pod.SecurityContext.RunAsNonRoot, true)

	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("want one sidecar and one container, got %d and %d", len(pod.InitContainers), len(pod.Containers))
	}
	ev, agent := pod.InitContainers[0], pod.Containers[0]
	check("sidecar name", ev.Name, podcontract.EventsContainer)
	check("sidecar restartPolicy", *ev.RestartPolicy, corev1.ContainerRestartPolicyAlways)
	check("sidecar args", ev.Args, []string{"tail", "--linger", "60s", "--progress-addr", ":8788", podcontract.EventsFile})
	check("sidecar progress port", ev.Ports, []corev1.ContainerPort{{Name: "progress", ContainerPort: 8788, Protocol: corev1.ProtocolTCP}})
	check("sidecar mount read-only", ev.VolumeMounts[0].ReadOnly, true)
	check("agent name", agent.Name, podcontract.AgentContainer)
	check("agent image", agent.Image, "runner:1")
	check("pull policy", agent.ImagePullPolicy, corev1.PullNever)
	check("termination message path", agent.TerminationMessagePath, "/dev/termination-log")
	check("termination message policy", agent.TerminationMessagePolicy, corev1.TerminationMessageReadFile)
	check("agent memory limit", agent.Resources.Limits.Memory().String(), "2Gi")
	sc := agent.SecurityContext
	check("no privilege escalation", *sc.AllowPrivilegeEscalation, false)
	check("capabilities", sc.Capabilities.Drop, []corev1.Capability{"ALL"})
	check("seccomp (bubblewrap)", *sc.SeccompProfile, corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun/bwrap.json")})
	check("apparmor (the runtime's default)", sc.AppArmorProfile, (*corev1.AppArmorProfile)(nil))
	check("privileged", sc.Privileged, (*bool)(nil))

	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	check("shared emptyDir", vols[sharedVolume].EmptyDir != nil, true)
	check("workspace claim", vols[workspaceVolume].PersistentVolumeClaim.ClaimName, "repo")
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range agent.VolumeMounts {
		mounts[m.MountPath] = m
	}
	check("workspace subPath", mounts[podcontract.WorkspaceDir].SubPath, "src")
	check("shared mount", mounts[podcontract.SharedDir].Name, sharedVolume)

	// The Job is a pure function: the same run gives the same Job, and it
	// shares nothing with the run.
	if again := BuildJob(run, cfg); !reflect.DeepEqual(again, job) {
		t.Error("BuildJob is not deterministic")
	}
	job.Spec.Template.Spec.Tolerations[0].Key = "changed"
	if run.Spec.PodOverrides.Tolerations[0].Key != "agents" {
		t.Error("the Job shares memory with the AgentRun")
	}
}

func TestBuildJobWithoutSandbox(t *testing.T) {
	run := newRun("plain", func(s *v1alpha1.AgentRunSpec) {
		s.Sandbox = v1alpha1.SandboxNone
		s.Prompt = v1alpha1.PromptSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "task"}, Key: "prompt"}}
		s.Images = []v1alpha1.ImageSource{{ConfigMapKeyRef: &v1alpha1.KeyRef{Name: "imgs", Key: "a.png"}}}
	})
	job := BuildJob(run, JobConfig{RunnerImage: "runner:1"})
	agent := job.Spec.Template.Spec.Containers[0]
	if *job.Spec.Suspend {
		t.Error("a Job without a queue label must not be suspended")
	}
	if agent.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || agent.SecurityContext.AppArmorProfile != nil {
		t.Errorf("without the sandbox the agent keeps the default profiles: %+v", agent.SecurityContext)
	}
	if v := volume(job, promptVolume); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "task" ||
		!reflect.DeepEqual(v.ConfigMap.Items, []corev1.KeyToPath{{Key: "prompt", Path: "prompt"}}) {
		t.Fatalf("the prompt file must come from the ConfigMap: %+v", v)
	}
	if _, ok := job.Spec.Template.Annotations[AnnotationPrompt]; ok {
		t.Error("a prompt from a ConfigMap is no annotation")
	}
	var images *corev1.Volume
	for i, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == imagesVolume {
			images = &job.Spec.Template.Spec.Volumes[i]
		}
	}
	if images == nil || images.Projected.Sources[0].ConfigMap.Items[0].Path != "0/a.png" {
		t.Fatalf("images volume: %+v", images)
	}
}

// volume is the Pod's volume called name, or nil.
func volume(job *batchv1.Job, name string) *corev1.Volume {
	for i, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &job.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// TestPromptIsAFile: the runner reads the prompt from --prompt-file, which
// a read-only volume projects from the text (through the Pod's
// annotation), the ConfigMap or the Secret; never from an argument or a
// variable, which are bounded at 128 KiB.
func TestPromptIsAFile(t *testing.T) {
	secret := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "p"}, Key: "k"}
	for _, tt := range []struct {
		name   string
		prompt v1alpha1.PromptSource
		check  func(*batchv1.Job, *corev1.Volume) string
	}{
		{"text, dollars and a leading dash kept as written", v1alpha1.PromptSource{Text: ptr.To("--help me: echo $(HOME) costs $5 $$")},
			func(job *batchv1.Job, v *corev1.Volume) string {
				if got := job.Spec.Template.Annotations[AnnotationPrompt]; got != "--help me: echo $(HOME) costs $5 $$" {
					return "annotation " + got
				}
				if _, ok := job.Annotations[AnnotationPrompt]; ok {
					return "the Job's own annotations carry the prompt"
				}
				if d := v.DownwardAPI; d == nil || len(d.Items) != 1 || d.Items[0].Path != "prompt" ||
					d.Items[0].FieldRef.FieldPath != "metadata.annotations['agentrun.dev/prompt']" {
					return fmt.Sprintf("downward API volume %+v", v)
				}
				return ""
			}},
		{"Secret", v1alpha1.PromptSource{SecretKeyRef: secret}, func(job *batchv1.Job, v *corev1.Volume) string {
			if v.Secret == nil || v.Secret.SecretName != "p" || !reflect.DeepEqual(v.Secret.Items, []corev1.KeyToPath{{Key: "k", Path: "prompt"}}) {
				return fmt.Sprintf("secret volume %+v", v)
			}
			return ""
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := BuildJob(newRun("r", func(s *v1alpha1.AgentRunSpec) { s.Prompt = tt.prompt }), JobConfig{RunnerImage: "runner:1"})
			agent := job.Spec.Template.Spec.Containers[0]
			v := volume(job, promptVolume)
			if v == nil {
				t.Fatal("no prompt volume")
			}
			if msg := tt.check(job, v); msg != "" {
				t.Error(msg)
			}
			var mounted bool
			for _, m := range agent.VolumeMounts {
				mounted = mounted || m.Name == promptVolume && m.MountPath == podcontract.PromptDir && m.ReadOnly
			}
			if !mounted {
				t.Errorf("the prompt volume is not mounted read-only at %s: %+v", podcontract.PromptDir, agent.VolumeMounts)
			}
			if n := len(agent.Args); agent.Args[n-3] != "--prompt-file" || agent.Args[n-2] != podcontract.PromptFile || agent.Args[n-1] != "--" {
				t.Errorf("args end %q", agent.Args[n-3:])
			}
			for _, e := range agent.Env {
				if e.Name == "AGENTRUN_PROMPT" {
					t.Errorf("the prompt is a variable: %+v", e)
				}
			}
		})
	}
}

func TestSeccompOverride(t *testing.T) {
	run := newRun("local", func(s *v1alpha1.AgentRunSpec) {
		s.PodOverrides = &v1alpha1.PodOverrides{SeccompProfile: &corev1.SeccompProfile{
			Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun-bwrap.json")}}
	})
	sc := BuildJob(run, JobConfig{}).Spec.Template.Spec.Containers[0].SecurityContext
	if sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || *sc.SeccompProfile.LocalhostProfile != "agentrun-bwrap.json" {
		t.Errorf("seccomp override ignored: %+v", sc.SeccompProfile)
	}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// TestCredentialsReachTheRunnerOnly: a credential's Secret is in the agent
// container's environment (the runner's), never passed into the sandbox,
// and the upstream CA is mounted read-only where --upstream-ca points.
func TestCredentialsReachTheRunnerOnly(t *testing.T) {
	ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: "anthropic"}
	run := newRun("r", func(s *v1alpha1.AgentRunSpec) {
		s.Credentials = []v1alpha1.Credential{{Name: "ANTHROPIC_API_KEY", Hosts: []string{"api.anthropic.com:443"}, ValueFrom: v1alpha1.CredentialSource{SecretKeyRef: ref}}}
		s.UpstreamCA = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gw-ca"}, Key: "ca.crt"}
	})
	pod := BuildJob(run, JobConfig{RunnerImage: "runner:test"}).Spec.Template.Spec
	agent := pod.Containers[0]
	var found bool
	for _, e := range agent.Env {
		if e.Name == "ANTHROPIC_API_KEY" {
			found = e.ValueFrom != nil && reflect.DeepEqual(e.ValueFrom.SecretKeyRef, ref) && e.Value == ""
		}
	}
	if !found {
		t.Errorf("the credential's Secret is not in the runner's environment: %+v", agent.Env)
	}
	for i, a := range agent.Args {
		if a == "--pass-env" && agent.Args[i+1] == "ANTHROPIC_API_KEY" {
			t.Errorf("the credential is passed into the sandbox")
		}
	}
	for _, c := range pod.InitContainers {
		for _, e := range c.Env {
			if e.Name == "ANTHROPIC_API_KEY" {
				t.Errorf("the events sidecar gets the credential")
			}
		}
	}
	var mounted bool
	for _, m := range agent.VolumeMounts {
		mounted = mounted || (m.MountPath == "/agentrun-upstream-ca" && m.ReadOnly)
	}
	var vol bool
	for _, v := range pod.Volumes {
		vol = vol || (v.ConfigMap != nil && v.ConfigMap.Name == "gw-ca" && v.ConfigMap.Items[0].Key == "ca.crt" && v.ConfigMap.Items[0].Path == "ca.pem")
	}
	if !mounted || !vol {
		t.Errorf("the upstream CA is not mounted: %+v %+v", agent.VolumeMounts, pod.Volumes)
	}
}

// TestTerminationMessageFileIsTheKubeletDefault: the runner writes its end
// summary where the kubelet reads a container's termination message.
func TestTerminationMessageFileIsTheKubeletDefault(t *testing.T) {
	if podcontract.TerminationMessageFile != corev1.TerminationMessagePathDefault {
		t.Errorf("podcontract.TerminationMessageFile = %q, the kubelet reads %q", podcontract.TerminationMessageFile, corev1.TerminationMessagePathDefault)
	}
}
