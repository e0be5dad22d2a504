//go:build tools

// Package tools pins the etcd the Kubernetes tests run. It is a module of its
// own: k8s.io/kubernetes v1.37.2 requires etcd's server packages at v3.7.0,
// and the API server is tested against the etcd release it supports.
package tools

import _ "go.etcd.io/etcd/server/v3"
