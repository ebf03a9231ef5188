//go:build tools

// Package tools pins Flux's kustomize-controller for the cluster tests (issue 21).
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
)
