//go:build tools

// Package tools pins the Kubernetes API server, kubectl and etcd that the
// tests run; `make kube` builds them into bin/.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
