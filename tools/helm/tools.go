//go:build tools

// Package tools pins the Helm CLI (build/tools/bin/helm): `helm template` renders the bjw-s app-template chart kept
// in tests/fixtures/charts, offline, so a test holds model/app_template.py's reading of a HelmRelease's values to
// the pod spec Helm's own engine renders (issue 53).
//
// Upstream's go.mod has no replace, but its main is a package under cmd/ with the version stamped by ldflags;
// scripts/build-tools builds cmd/helm by path as upstream's Makefile does (CGO_ENABLED=0, -s -w, -trimpath,
// internal/version stamped).
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
