package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// chartJobConfig is the manager's configuration with the chart's
// defaults: the sandbox's Localhost seccomp profile installed on the nodes.
var chartJobConfig = JobConfig{RunnerImage: "agentrun-runner:0.1.0",
	SandboxSeccomp: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun/bwrap.json")}}

// TestAgentPodsPassPodSecurity: the Pod of every spec variant passes the
// upstream Pod Security checks at "restricted" (and so "baseline") with
// the chart's defaults; only the documented opt-ins (an Unconfined seccomp
// or AppArmor profile in podOverrides) fall below, and not silently.
func TestAgentPodsPassPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: "k"}
	variants := []struct {
		name       string
		cfg        JobConfig
		edit       func(*v1alpha1.AgentRunSpec)
		restricted bool
		baseline   bool
	}{
		{"defaults", chartJobConfig, nil, true, true},
		{"no profile installed (RuntimeDefault: the sandbox fails closed)", JobConfig{}, nil, true, true},
		{"AppArmor profile on AppArmor nodes", JobConfig{SandboxSeccomp: chartJobConfig.SandboxSeccomp,
			SandboxAppArmor: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun-bwrap")}}, nil, true, true},
		{"without a sandbox", chartJobConfig, func(s *v1alpha1.AgentRunSpec) { s.Sandbox = v1alpha1.SandboxNone }, true, true},
		{"everything a user may set", chartJobConfig, func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{{Name: "ANTHROPIC_API_KEY", Hosts: []string{"api.anthropic.com:443"}, ValueFrom: v1alpha1.CredentialSource{SecretKeyRef: secret}}}
			s.UpstreamCA = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Key: "ca.crt"}
			s.Env = []corev1.EnvVar{{Name: "GH_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secret}}}
			s.Prompt = v1alpha1.PromptSource{SecretKeyRef: secret}
			s.Images = []v1alpha1.ImageSource{{ConfigMapKeyRef: &v1alpha1.KeyRef{Name: "imgs", Key: "a.png"}}, {SecretKeyRef: &v1alpha1.KeyRef{Name: "p", Key: "b.png"}}}
			s.Session = &v1alpha1.Session{ClaimName: "sessions"}
			s.Workspace = &v1alpha1.Workspace{ClaimName: "repo", SubPath: "src"}
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"github.com"}}
			s.PodOverrides = &v1alpha1.PodOverrides{ServiceAccountName: "agents", RuntimeClassName: ptr.To("gvisor"),
				NodeSelector: map[string]string{"pool": "agents"}, Tolerations: []corev1.Toleration{{Key: "agents", Operator: corev1.TolerationOpExists}},
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: mustQuantity("4Gi")}},
				Labels:    map[string]string{KueueQueueLabel: "agents"}}
		}, true, true},
		{"opt-in: seccomp Unconfined", chartJobConfig, func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, false, false},
		{"opt-in: AppArmor Unconfined", chartJobConfig, func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}, false, false},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tmpl := BuildJob(newRun("r", v.edit), v.cfg).Spec.Template
			for level, want := range map[api.Level]bool{api.LevelRestricted: v.restricted, api.LevelBaseline: v.baseline} {
				res := policy.AggregateCheckResults(eval.EvaluatePod(api.LevelVersion{Level: level, Version: api.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec))
				if res.Allowed != want {
					t.Errorf("%s: allowed %v, want %v (%s: %s)", level, res.Allowed, want, res.ForbiddenReason(), res.ForbiddenDetail())
				}
			}
		})
	}
}
