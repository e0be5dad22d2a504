package kubetest

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// The cluster serves the admin, gives the gateway read access and no more,
// accepts the InferencePool CRD, and lets a Pod's status be set without a
// kubelet.
func TestClusterIdentitiesAndObjects(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	const slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
	if status, body, err := c.DoAs(ctx, c.GatewayToken, http.MethodGet, slices, nil); err != nil || status != http.StatusOK {
		t.Fatalf("gateway list endpointslices: %d %v %s", status, err, body)
	}
	status, _, err := c.DoAs(ctx, c.GatewayToken, http.MethodPost, slices, []byte(`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"x"},"addressType":"IPv4","endpoints":[]}`))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("gateway create endpointslice: %d %v, want 403", status, err)
	}
	if status, _, _ := c.DoAs(ctx, c.GatewayToken, http.MethodGet, "/api/v1/namespaces/default/secrets", nil); status != http.StatusForbidden {
		t.Fatalf("gateway list secrets: %d, want 403", status)
	}
	c.InstallInferencePoolCRD(t)
	c.Apply(t, `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: qwen, namespace: default}
spec:
  selector: {matchLabels: {app: qwen}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {name: epp, port: {number: 9002}}
`)
	if status, body, _ := c.DoAs(ctx, c.GatewayToken, http.MethodGet, "/apis/inference.networking.k8s.io/v1/namespaces/default/inferencepools/qwen", nil); status != http.StatusOK || !strings.Contains(string(body), `"number":8000`) {
		t.Fatalf("gateway get inferencepool: %d %s", status, body)
	}
	c.Apply(t, Pod("qwen-0", map[string]string{"app": "qwen"}))
	c.SetPodStatus(t, "qwen-0", "10.77.0.11", true)
	_, body, _ := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/default/pods/qwen-0", nil)
	if !strings.Contains(string(body), `"podIP":"10.77.0.11"`) {
		t.Fatalf("pod status not set: %s", body)
	}
	// EndpointSlices refuse loopback addresses: why the tests use a
	// private network namespace.
	status, body, _ = c.Do(ctx, http.MethodPost, slices, []byte(`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"lo"},"addressType":"IPv4","endpoints":[{"addresses":["127.0.0.1"]}]}`))
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("loopback endpoint: %d %s, want 422", status, body)
	}
}
