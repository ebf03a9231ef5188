//go:build tools

// Package tools pins the Flux CLI that `make tools` builds (build/tools/bin/flux), for `flux build kustomization`:
// kustomize-controller's own build of a Kustomization, offline, the judge of gitops/fluxview.py's walk.
//
// Upstream's cmd/flux embeds manifests/*.yaml, which its release process downloads and git ignores (only `flux
// install` and `bootstrap` read them), and its go.mod has a replace, so `go install …@version` cannot build it:
// scripts/build-tools builds cmd/flux in a writable copy of this exact module version (verified by go.sum below)
// with a placeholder manifest there.
package tools

import (
	_ "github.com/fluxcd/flux2/v2/cmd/flux"
)
