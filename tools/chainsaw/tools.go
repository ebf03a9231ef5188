//go:build tools

// Package tools pins Kyverno Chainsaw (build/tools/bin/chainsaw), declarative assert suites run against a cluster
// (issue 31). The proxy's version list stops at v0.2.12; v0.2.15 is served when asked for by name.
package tools

import (
	_ "github.com/kyverno/chainsaw"
)
