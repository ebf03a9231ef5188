//go:build tools

// Package tools pins the Pulumi CLI that `make tools` builds (build/tools/bin/pulumi).
//
// Upstream's pkg/go.mod replaces sdk/v3 with a relative path, so `go install …@version` refuses it; requiring
// pkg/v3 and sdk/v3 at one release from this module and building the package by path builds the same main.
package tools

import (
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
)
