//go:build tools

// Package tools pins etcd, the API server's store in the cluster tests (issue 21).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
