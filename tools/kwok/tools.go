//go:build tools

// Package tools pins kwok: nodes without a kubelet, with the capacity the cluster tests write into their status,
// and pods on them turned Running (issue 21).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
