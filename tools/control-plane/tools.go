//go:build tools

// Package tools pins the control plane that `make tools` builds for the cluster tests (issue 21): kube-apiserver,
// kube-scheduler and kube-controller-manager at the nodes' minor version (v1.36).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
