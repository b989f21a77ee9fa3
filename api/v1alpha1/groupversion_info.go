// Package v1alpha1 is the agentrun.dev/v1alpha1 API: the AgentRun resource,
// one run of a coding agent as a Kubernetes Job; the cluster-scoped
// AgentRunPolicy, what a platform admin lets the AgentRuns of some
// namespaces ask for (the parameters of the agentrun-policy
// ValidatingAdmissionPolicy); and the namespaced AgentBudget, a cap on what
// a namespace's AgentRuns spend per window.
//
// +kubebuilder:object:generate=true
// +groupName=agentrun.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "agentrun.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this API's types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
