package charts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// podFieldCase is one way an AgentRun author shapes the Pod.
type podFieldCase struct {
	name   string
	change func(*v1alpha1.AgentRunSpec)
	// refused is the default policy's refusal ("" when it admits the run).
	refused string
	// stillRefused is the loosened policy's refusal ("" when it admits).
	stillRefused string
}

// podFieldCases are the fields of api/v1alpha1/policycoverage.go that the
// policy bounds, each set as an author who wants more than the standard
// preset gives would set it (the name says what for), against the
// namespace ns.
func podFieldCases(ns string) []podFieldCase {
	by := "AgentRunPolicy agentrun-policy (namespace " + ns + ")"
	po := func(edit func(*v1alpha1.PodOverrides)) func(*v1alpha1.AgentRunSpec) {
		return func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{}
			edit(s.PodOverrides)
		}
	}
	secretRef := func(secret string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "k"}}
	}
	return []podFieldCase{
		{"a run like the samples: full network, a Secret, Kueue's queue label", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkFull}
			s.Env = []corev1.EnvVar{{Name: "ANTHROPIC_API_KEY", ValueFrom: secretRef("agent-keys")}, {Name: "ANTHROPIC_BASE_URL", Value: "https://gw.example.com"}}
			s.Credentials = []v1alpha1.Credential{{Name: "OPENAI_API_KEY", Hosts: []string{"api.openai.com:443"},
				ValueFrom: v1alpha1.CredentialSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-keys"}, Key: "openai"}}}}
			s.Prompt = v1alpha1.PromptSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "task"}, Key: "prompt"}}
			s.Workspace = &v1alpha1.Workspace{ClaimName: "work"}
			s.PodOverrides = &v1alpha1.PodOverrides{Labels: map[string]string{"kueue.x-k8s.io/queue-name": "agents"}}
		}, "", ""},
		{"an image of the author's choosing under the sandbox's seccomp profile", po(func(o *v1alpha1.PodOverrides) { o.Image = "evil.example.com/miner:latest" }),
			"spec.podOverrides.image evil.example.com/miner:latest is not allowed by " + by + ": use one of agentrun-runner:", ""},
		{"the sandbox off", func(s *v1alpha1.AgentRunSpec) { s.Sandbox = v1alpha1.SandboxNone },
			"spec.sandbox None is not allowed by " + by, ""},
		{"a seccomp profile without the filter", po(func(o *v1alpha1.PodOverrides) {
			o.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}), "spec.podOverrides.seccompProfile unconfined is not allowed by " + by + ": leave it out (the manager's sandbox profile)", ""},
		{"another Localhost seccomp profile", po(func(o *v1alpha1.PodOverrides) {
			o.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("team/loose.json")}
		}), "spec.podOverrides.seccompProfile localhost/team/loose.json is not allowed", ""},
		{"AppArmor off", po(func(o *v1alpha1.PodOverrides) {
			o.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}), "spec.podOverrides.appArmorProfile unconfined is not allowed by " + by, ""},
		{"AppArmor off through the legacy annotation", po(func(o *v1alpha1.PodOverrides) {
			o.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/agent": "unconfined"}
		}), "spec.podOverrides.annotations container.apparmor.security.beta.kubernetes.io/agent is not allowed by " + by, ""},
		{"an AWS role through EKS IRSA's annotation", po(func(o *v1alpha1.PodOverrides) {
			o.Annotations = map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/admin"}
		}), "spec.podOverrides.annotations eks.amazonaws.com/role-arn is not allowed by " + by + ": leave spec.podOverrides.annotations out (never eks.amazonaws.com/*", ""},
		{"Vault's agent injector", po(func(o *v1alpha1.PodOverrides) {
			o.Annotations = map[string]string{"vault.hashicorp.com/agent-inject": "true", "vault.hashicorp.com/role": "payments"}
			// (Both keys are named, in the map's order, which CEL leaves open.)
		}), "are not allowed by " + by + ": leave spec.podOverrides.annotations out (never eks.amazonaws.com/*", ""},
		{"an Azure workload identity token", po(func(o *v1alpha1.PodOverrides) {
			o.Labels = map[string]string{"azure.workload.identity/use": "true"}
		}), "spec.podOverrides.labels azure.workload.identity/use is not allowed by " + by + ": allowed: kueue.x-k8s.io/queue-name", ""},
		{"the mesh identity of an Istio sidecar", po(func(o *v1alpha1.PodOverrides) {
			o.Labels = map[string]string{"sidecar.istio.io/inject": "true"}
		}), "spec.podOverrides.labels sidecar.istio.io/inject is not allowed", ""},
		{"another app's Service and NetworkPolicy through its label", po(func(o *v1alpha1.PodOverrides) {
			o.Labels = map[string]string{"app": "payments"}
		}), "spec.podOverrides.labels app is not allowed by " + by, ""},
		{"preempting other workloads", po(func(o *v1alpha1.PodOverrides) { o.PriorityClassName = "system-cluster-critical" }),
			"spec.podOverrides.priorityClassName system-cluster-critical is not allowed by " + by + ": leave it out", ""},
		{"the control plane's nodes", po(func(o *v1alpha1.PodOverrides) {
			o.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
			o.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}), "spec.podOverrides.tolerations of node-role.kubernetes.io/control-plane not allowed by " + by, ""},
		{"every taint", po(func(o *v1alpha1.PodOverrides) {
			o.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}),
			"spec.podOverrides.tolerations of (no key: every taint) not allowed", "spec.podOverrides.tolerations of (no key: every taint) not allowed"},
		{"a chosen node", po(func(o *v1alpha1.PodOverrides) { o.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-7"} }),
			"spec.podOverrides.nodeSelector kubernetes.io/hostname is not allowed by " + by, ""},
		{"beside another workload's Pods", po(func(o *v1alpha1.PodOverrides) {
			o.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "payments"}}, TopologyKey: "kubernetes.io/hostname"}}}}
		}), "spec.podOverrides.affinity is not allowed by " + by, ""},
		{"another container runtime", po(func(o *v1alpha1.PodOverrides) { o.RuntimeClassName = ptr.To("runc-privileged") }),
			"spec.podOverrides.runtimeClassName runc-privileged is not allowed by " + by, ""},
		{"an account that webhooks give a cloud token", po(func(o *v1alpha1.PodOverrides) { o.ServiceAccountName = "deployer" }),
			"spec.podOverrides.serviceAccountName deployer is not allowed by " + by + ": use one of default", ""},
		{"bubblewrap found on the author's PATH", func(s *v1alpha1.AgentRunSpec) {
			s.Env = []corev1.EnvVar{{Name: "PATH", Value: "/workspace/bin:/usr/bin"}}
		}, "the variable PATH (spec.env or a credential's name) is denied by " + by + ": it would change the runner", ""},
		{"the runner's upstream trust", func(s *v1alpha1.AgentRunSpec) {
			s.Env = []corev1.EnvVar{{Name: "SSL_CERT_FILE", Value: "/workspace/ca.pem"}, {Name: "LD_PRELOAD", Value: "/workspace/x.so"}}
		}, "the variable SSL_CERT_FILE, LD_PRELOAD (spec.env or a credential's name) is denied", ""},
		{"a credential named like the runner's variable", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{{Name: "HOME", Hosts: []string{"api.anthropic.com:443"},
				ValueFrom: v1alpha1.CredentialSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-keys"}, Key: "k"}}}}
		}, "the variable HOME (spec.env or a credential's name) is denied", ""},
		{"variables no check can name", func(s *v1alpha1.AgentRunSpec) {
			s.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-keys"}}}}
		}, "spec.envFrom is not allowed by " + by, ""},
		{"the cloud metadata service", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"api.anthropic.com:443", "169.254.169.254:80"}}
		}, "spec.network.allowHosts 169.254.169.254:80 is not allowed by " + by + ": an IP:PORT entry lifts the proxy's refusal of private addresses; list host names only", ""},
	}
}

// loosePolicy allows each field of podFieldCases, as an admin who wants
// them would write it.
const loosePolicy = `policy.spec={"allowedImages":["*"],"allowSandboxNone":true,"allowedSeccompProfiles":["unconfined","localhost/team/*"],` +
	`"allowedAppArmorProfiles":["unconfined"],"allowedLabels":["*"],"deniedLabels":[],"allowedAnnotations":["*"],"deniedAnnotations":[],` +
	`"allowedPriorityClasses":["system-cluster-critical"],"allowedTolerations":["node-role.kubernetes.io/*"],` +
	`"allowedNodeSelectorKeys":["kubernetes.io/hostname","node-role.kubernetes.io/*"],"allowAffinity":true,` +
	`"allowedRuntimeClasses":["runc-privileged"],"allowedServiceAccounts":["default","deployer"],"deniedEnv":[],"allowEnvFrom":true,` +
	`"allowedAddresses":["169.254.169.254:80"]}`

// TestDefaultPolicyRefusesEveryPodField installs the chart with its
// defaults, which hold the admin policy on (standard preset, every
// namespace), and creates AgentRuns as a namespace user would: each field
// through which an author would get more than the preset gives is refused
// with the message that says what to change, and the samples' kind of run
// passes. The same release with each of those fields allowed through
// policy.spec then admits each run (a toleration of every taint still
// needs '*').
func TestDefaultPolicyRefusesEveryPodField(t *testing.T) {
	isolateHelm(t)
	ctx := context.Background()
	c := startCluster(t)
	k, _ := policyClient(t, c.cfg)
	if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	c.helm("install", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--create-namespace")
	cases := podFieldCases("team")
	waitFor(t, "the default policy is in force", 90*time.Second, func() string {
		return refusedWith(tryCreate(ctx, k, agentRun("team", cases[1].change)), cases[1].refused)
	})
	check := func(t *testing.T, policy string, want func(podFieldCase) string) {
		for _, tc := range cases {
			err := tryCreate(ctx, k, agentRun("team", tc.change))
			w := want(tc)
			if w == "" {
				if err != nil {
					t.Errorf("%s (%s policy): refused: %v", tc.name, policy, err)
				}
				continue
			}
			if msg := refusedWith(err, w); msg != "" {
				t.Errorf("%s (%s policy): got %s\nwant a refusal with %q", tc.name, policy, msg, w)
			}
		}
	}
	t.Run("default", func(t *testing.T) { check(t, "default", func(tc podFieldCase) string { return tc.refused }) })
	t.Run("the samples pass the default policy", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(root(t), "config", "samples", "agentrun_*.yaml"))
		if len(files) == 0 {
			t.Fatal("no samples")
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			run := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(b, &run.Object); err != nil {
				t.Fatal(err)
			}
			run.SetNamespace("team")
			if err := tryCreate(ctx, k, run); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	})

	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--set-json", loosePolicy)
	waitFor(t, "the loosened policy is in force", 30*time.Second, func() string {
		if err := tryCreate(ctx, k, agentRun("team", cases[1].change)); err != nil {
			return err.Error()
		}
		return ""
	})
	t.Run("loosened", func(t *testing.T) { check(t, "loosened", func(tc podFieldCase) string { return tc.stillRefused }) })

	// A deny list holds where the allow list says '*': the keys on which
	// webhooks inject tokens stay out unless the admin removes them too.
	c.helm("upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--set-json", `policy.spec={"allowedAnnotations":["*"]}`)
	irsa := agentRun("team", func(s *v1alpha1.AgentRunSpec) {
		s.PodOverrides = &v1alpha1.PodOverrides{Annotations: map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/admin",
			"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}
	})
	waitFor(t, "the deny list beside allowedAnnotations *", 30*time.Second, func() string {
		err := tryCreate(ctx, k, irsa)
		if msg := refusedWith(err, "spec.podOverrides.annotations eks.amazonaws.com/role-arn is not allowed"); msg != "" {
			return msg
		}
		if strings.Contains(err.Error(), "safe-to-evict") {
			return "an allowed annotation is named: " + err.Error()
		}
		return ""
	})
}
