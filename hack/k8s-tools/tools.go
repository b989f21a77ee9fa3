//go:build tools

// Package tools pins the Kubernetes commands that hack/envtest-assets.sh
// builds, so `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
