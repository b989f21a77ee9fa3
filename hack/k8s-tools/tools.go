//go:build tools

// Package tools pins the Kubernetes commands that hack/envtest-assets.sh
// (kube-apiserver, kubectl) and hack/cluster.sh (kube-controller-manager,
// kube-scheduler, kubelet) build, so `go mod tidy` keeps their dependencies
// in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
