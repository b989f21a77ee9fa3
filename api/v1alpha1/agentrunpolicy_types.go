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
// An empty spec is the tightest policy but for the runtime: a field left
// out allows nothing beyond the AgentRun defaults (no image, service
// account or runtime class override; no sandbox none; no network mode
// full), and a maximum left out sets no bound beyond the AgentRun CRD's
// own. Lists are allow lists: an entry `*` allows any value.
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

	// AllowSandboxNone lets a run set spec.sandbox none: its agent then
	// runs without bubblewrap, with the runner's own environment and
	// without the filter proxy. Default false.
	// +optional
	AllowSandboxNone bool `json:"allowSandboxNone,omitempty"`

	// AllowNetworkFull lets a run use spec.network.mode full (any public
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
	// the Pod runs as the namespace's default account. agentrun never
	// mounts the account's token, but the account still decides image
	// pull secrets and what admission policies keyed on it allow.
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
