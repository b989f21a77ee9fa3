package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentRunPolicySpec is what a platform admin lets AgentRuns ask for. It is
// the parameter resource of the ValidatingAdmissionPolicy agentrun-policy
// (config/policy, or the Helm chart's policy.enabled): the API server
// checks every new AgentRun in the namespaces a binding selects against
// the AgentRunPolicy the binding names, and refuses it with a message that
// says what to change. No webhook and no controller are involved.
//
// Creating an AgentRun is creating a Pod: the policy covers every field of
// the AgentRun spec that shapes the Pod or what its runner does
// (docs/security.md; api/v1alpha1/policycoverage.go lists which policy
// field covers which AgentRun field, and why the rest need none).
//
// An empty spec is the tightest policy but for the runtime: a field left
// out allows nothing beyond the AgentRun defaults (no image, service
// account, runtime class, priority class, profile, label, annotation,
// toleration, node selection or envFrom; no Secret, ConfigMap or claim
// reference; no private address; no sandbox none; no network mode full),
// and a maximum left out sets no bound beyond the AgentRun CRD's own.
// Lists are allow lists unless their name says denied: an entry `*`
// allows any value, and where the field says so an entry ending in `*` is
// a prefix.
type AgentRunPolicySpec struct {
	// AllowedRuntimes are the runtimes a run may use (spec.runtime).
	// Empty: any runtime the AgentRun CRD accepts.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Enum=claude-code;codex;pi;dsh
	AllowedRuntimes []string `json:"allowedRuntimes,omitempty"`

	// AllowedImages are the images a run may name in
	// spec.podOverrides.image: an exact reference
	// (registry.example.com/agentrun-runner:0.1.0, or one pinned by
	// @sha256:...), or a prefix ending in `*`
	// (registry.example.com/agentrun/*; end the prefix with `/` or `:` so
	// that it cannot match a longer repository name); `*` alone allows any
	// image. Empty: no override, every run uses the manager's runner image
	// (--runner-image).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	AllowedImages []string `json:"allowedImages,omitempty"`

	// AllowSandboxNone lets a run set spec.sandbox None: its agent then
	// runs without bubblewrap, with the runner's own environment and
	// without the filter proxy. Default false.
	// +optional
	AllowSandboxNone bool `json:"allowSandboxNone,omitempty"`

	// AllowNetworkFull lets a run use spec.network.mode Full (any public
	// address), which is also what an AgentRun without spec.network gets
	// unless the chart's defaults.network changed the CRD's default.
	// Default false: runs must say which hosts they reach (mode custom)
	// or reach none.
	// +optional
	AllowNetworkFull bool `json:"allowNetworkFull,omitempty"`

	// MaxTimeout is the longest spec.timeout a run may set, a duration
	// such as 2h. An AgentRun without a timeout gets the CRD's default
	// (1h), which must fit too. Empty: the CRD's bound (168h).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="maxTimeout must be a duration of at least 1s, such as 30m or 2h"
	MaxTimeout string `json:"maxTimeout,omitempty"`

	// MaxTurns makes spec.limits.maxTurns required, at most this many.
	// Unset: no bound.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTurns *int32 `json:"maxTurns,omitempty"`

	// MaxTokens makes spec.limits.maxTokens required, at most this many.
	// Unset: no bound.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTokens *int64 `json:"maxTokens,omitempty"`

	// AllowedServiceAccounts are the ServiceAccounts a run may name in
	// spec.podOverrides.serviceAccountName (`*`: any). Empty: no override,
	// the Pod runs as the namespace's default account. The Pod sets
	// automountServiceAccountToken: false, so Kubernetes mounts no token
	// of the account; but the account still decides image pull secrets,
	// what admission policies keyed on it allow, and what mutating
	// webhooks keyed on it inject: EKS IRSA (eks.amazonaws.com/role-arn on
	// the account) and Azure workload identity project a cloud token into
	// the Pod, readable by the runner (the sandbox hides
	// /var/run/secrets from the agent).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`

	// AllowedRuntimeClasses are the RuntimeClasses a run may name in
	// spec.podOverrides.runtimeClassName (`*`: any). Empty: no override,
	// the Pod runs under the cluster's default runtime.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	AllowedRuntimeClasses []string `json:"allowedRuntimeClasses,omitempty"`

	// AllowedPriorityClasses are the PriorityClasses a run may name in
	// spec.podOverrides.priorityClassName (`*`: any): a high one preempts
	// other workloads. Empty: no override, the cluster's default.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	AllowedPriorityClasses []string `json:"allowedPriorityClasses,omitempty"`

	// AllowedSeccompProfiles are the seccomp profiles a run may name in
	// spec.podOverrides.seccompProfile, written as the kubelet's flag
	// writes them: runtime/default, unconfined, localhost/PATH; an entry
	// ending in `*` is a prefix (localhost/team/*), `*` any. Empty: no
	// override, the manager's profile (the sandbox's agentrun/bwrap.json).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^(\*|runtime/default|unconfined|localhost/[^*]*\*?)$`
	AllowedSeccompProfiles []string `json:"allowedSeccompProfiles,omitempty"`

	// AllowedAppArmorProfiles are the AppArmor profiles a run may name in
	// spec.podOverrides.appArmorProfile: runtime/default, unconfined,
	// localhost/NAME; an entry ending in `*` is a prefix, `*` any. Empty:
	// no override, the manager's profile.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^(\*|runtime/default|unconfined|localhost/[^*]*\*?)$`
	AllowedAppArmorProfiles []string `json:"allowedAppArmorProfiles,omitempty"`

	// AllowedLabels are the keys a run may set in spec.podOverrides.labels
	// (they go on the Job and its Pod): exact, or a prefix ending in `*`
	// (kueue.x-k8s.io/*); `*` any. Labels select Pods for Services and
	// NetworkPolicies, and some make webhooks inject identities. Empty:
	// no labels.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	AllowedLabels []string `json:"allowedLabels,omitempty"`

	// DeniedLabels are label keys refused even where AllowedLabels allows
	// them, exact or prefixes ending in `*`: the keys on which mutating
	// webhooks inject credentials or identities (azure.workload.identity/use,
	// sidecar.istio.io/inject, ...).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	DeniedLabels []string `json:"deniedLabels,omitempty"`

	// AllowedAnnotations are the keys a run may set in
	// spec.podOverrides.annotations, as AllowedLabels. Empty: no
	// annotations.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	AllowedAnnotations []string `json:"allowedAnnotations,omitempty"`

	// DeniedAnnotations are annotation keys refused even where
	// AllowedAnnotations allows them, as DeniedLabels
	// (eks.amazonaws.com/role-arn, vault.hashicorp.com/*, ...).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	DeniedAnnotations []string `json:"deniedAnnotations,omitempty"`

	// AllowedTolerations are the taint keys a run may tolerate in
	// spec.podOverrides.tolerations, exact or prefixes ending in `*`; `*`
	// any, and only `*` allows a toleration without a key (which
	// tolerates every taint, the control plane's included). Empty: none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	AllowedTolerations []string `json:"allowedTolerations,omitempty"`

	// AllowedNodeSelectorKeys are the node label keys a run may use in
	// spec.podOverrides.nodeSelector (kubernetes.io/arch,
	// node.kubernetes.io/instance-type), exact or prefixes ending in `*`;
	// `*` any. Empty: no node selector.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[^*]*\*?$`
	AllowedNodeSelectorKeys []string `json:"allowedNodeSelectorKeys,omitempty"`

	// AllowAffinity lets a run set spec.podOverrides.affinity (node
	// affinity, and pod affinity or anti-affinity: placing its Pod beside
	// or away from other Pods). Default false.
	// +optional
	AllowAffinity bool `json:"allowAffinity,omitempty"`

	// AllowedSecrets are the Secrets of its namespace a run may read into
	// its Pod (`*`: any): in spec.env (secretKeyRef), spec.envFrom,
	// spec.credentials, spec.prompt, spec.images and
	// spec.podOverrides.imagePullSecrets. The Pod reads them with the
	// kubelet's rights, not the author's: a user who may create AgentRuns
	// but not read Secrets reads every Secret allowed here through the
	// agent. Empty: none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	AllowedSecrets []string `json:"allowedSecrets,omitempty"`

	// AllowedConfigMaps are the ConfigMaps of its namespace a run may read
	// into its Pod (`*`: any): in spec.env (configMapKeyRef),
	// spec.envFrom, spec.prompt, spec.images and spec.upstreamCA. Empty:
	// none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	AllowedConfigMaps []string `json:"allowedConfigMaps,omitempty"`

	// AllowedVolumeClaims are the PersistentVolumeClaims a run may mount
	// (spec.workspace.claimName, spec.session.claimName; `*`: any): the
	// agent reads and writes them. Empty: none (an emptyDir workspace, no
	// saved sessions).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	AllowedVolumeClaims []string `json:"allowedVolumeClaims,omitempty"`

	// DeniedEnv are variable names a run may not set in spec.env or name
	// as a credential (spec.credentials[].name), exact or prefixes ending
	// in `*`. Those variables are the agent container's: the runner, which
	// starts the sandbox, reads them too (PATH finds bubblewrap,
	// SSL_CERT_FILE decides which upstream certificates the runner trusts,
	// AGENTRUN_* configure the runner).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z_][A-Za-z0-9_]*\*?$`
	DeniedEnv []string `json:"deniedEnv,omitempty"`

	// AllowEnvFrom lets a run set spec.envFrom: every key of a Secret or
	// ConfigMap as a variable, names no policy can check at admission
	// (DeniedEnv cannot apply). Default false.
	// +optional
	AllowEnvFrom bool `json:"allowEnvFrom,omitempty"`

	// AllowedAddresses are the IP:PORT entries a run may list in
	// spec.network.allowHosts: each lifts the filter proxy's refusal of
	// private, loopback and link-local addresses (an in-cluster model
	// gateway; also the cloud metadata service 169.254.169.254:80, or a
	// kubelet). An entry is IP:PORT, IP:* (any port) or `*`. Empty: none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^(\*|[0-9]{1,3}(\.[0-9]{1,3}){3}:(\*|[0-9]{1,5}))$`
	AllowedAddresses []string `json:"allowedAddresses,omitempty"`

	// AllowedGitRepositories are the repositories a run may clone
	// (spec.git.repository, docs/git.md): an exact URL, or a prefix ending
	// in `*` (https://github.com/my-org/*; end it with `/` so that it
	// cannot match a longer owner name); `*` alone allows any. The runner
	// clones from the Pod's network directly (not through the agent's
	// filter proxy), so a prefix is also where it may connect. Empty: no
	// spec.git.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	// A prefix names at least the host and the slash after it
	// (https://git.example.com/*), so that it cannot match another host
	// whose name starts the same (git.example.com.evil.io) or another port.
	// +kubebuilder:validation:items:Pattern=`^(\*|https?://\*|https?://[^/*]+/[^*]*\*?|https?://[^/*]+)$`
	AllowedGitRepositories []string `json:"allowedGitRepositories,omitempty"`

	// AllowGitPlainHTTP lets a run clone an http:// repository
	// (spec.git.plainHTTP): its token then travels unencrypted. Default
	// false.
	// +optional
	AllowGitPlainHTTP bool `json:"allowGitPlainHTTP,omitempty"`

	// AllowedGitBranchPrefixes are the prefixes of the branches a run may
	// push its change to (spec.git.push.mode Branch; the branch is
	// push.branch, else agentrun/<name>-<uid>): agentrun/ keeps runs on
	// branches of their own; `*` allows any branch the token may write
	// (never a force push). Empty: no push mode Branch (a patch, or the
	// change reported only).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=200
	AllowedGitBranchPrefixes []string `json:"allowedGitBranchPrefixes,omitempty"`
}

// AgentRunPolicy constrains the AgentRuns of the namespaces that a
// ValidatingAdmissionPolicyBinding of the agentrun-policy
// ValidatingAdmissionPolicy selects. It is cluster-scoped: only cluster
// admins write it; namespace users read the rules that apply to them.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=arp
// +kubebuilder:printcolumn:name="Runtimes",type=string,JSONPath=`.spec.allowedRuntimes`
// +kubebuilder:printcolumn:name="Sandbox none",type=boolean,JSONPath=`.spec.allowSandboxNone`
// +kubebuilder:printcolumn:name="Network full",type=boolean,JSONPath=`.spec.allowNetworkFull`
// +kubebuilder:printcolumn:name="Max timeout",type=string,JSONPath=`.spec.maxTimeout`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentRunPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec AgentRunPolicySpec `json:"spec,omitempty"`
}

// AgentRunPolicyList is a list of AgentRunPolicies.
//
// +kubebuilder:object:root=true
type AgentRunPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentRunPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentRunPolicy{}, &AgentRunPolicyList{})
}
