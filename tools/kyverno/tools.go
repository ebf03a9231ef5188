//go:build tools

// Package tools pins the Kyverno CLI (build/tools/bin/kyverno), `kyverno apply`/`kyverno test` of policies offline
// (issue 31).
//
// Upstream's go.mod has a replace (k8s.io/pod-security-admission => Kyverno's fork), so `go install …@version` is
// refused; go.mod here requires the same release and repeats that replace, and scripts/build-tools builds
// cmd/cli/kubectl-kyverno by path.
package tools

import (
	_ "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno"
)
