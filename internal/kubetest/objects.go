package kubetest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// InferencePoolCRD is a CustomResourceDefinition of the Gateway API
// Inference Extension's InferencePool, version v1: the fields a gateway
// reads (spec.selector.matchLabels, spec.targetPorts[].number) with their
// validation, the rest of the spec kept as given.
const InferencePoolCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: inferencepools.inference.networking.k8s.io
  # *.k8s.io groups need the annotation; "unapproved" is accepted and says so.
  annotations: {api-approved.kubernetes.io: "unapproved, a copy for tests"}
spec:
  group: inference.networking.k8s.io
  scope: Namespaced
  names: {kind: InferencePool, listKind: InferencePoolList, plural: inferencepools, singular: inferencepool, shortNames: [infpool]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [selector, targetPorts]
            x-kubernetes-preserve-unknown-fields: true
            properties:
              selector:
                type: object
                required: [matchLabels]
                properties:
                  matchLabels:
                    type: object
                    additionalProperties: {type: string, maxLength: 63}
              targetPorts:
                type: array
                minItems: 1
                maxItems: 8
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [number]
                items:
                  type: object
                  required: [number]
                  properties:
                    number: {type: integer, format: int32, minimum: 1, maximum: 65535}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

// InstallInferencePoolCRD installs InferencePoolCRD and waits until the API
// serves it.
func (c *Cluster) InstallInferencePoolCRD(t testing.TB) {
	t.Helper()
	c.Apply(t, InferencePoolCRD)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		status, _, err := c.Do(context.Background(), http.MethodGet,
			"/apis/inference.networking.k8s.io/v1/namespaces/"+Namespace+"/inferencepools", nil)
		if err == nil && status == http.StatusOK {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the InferencePool CRD is not served after 30s")
}

// SetPodStatus sets a Pod's IP and Ready condition through the status
// subresource, as a kubelet would (no kubelet runs here).
func (c *Cluster) SetPodStatus(t testing.TB, name, ip string, ready bool) {
	t.Helper()
	cond := "False"
	if ready {
		cond = "True"
	}
	c.MergePatch(t, "/api/v1/namespaces/"+Namespace+"/pods/"+name+"/status", map[string]any{
		"status": map[string]any{
			"phase": "Running", "podIP": ip, "podIPs": []map[string]string{{"ip": ip}},
			"conditions": []map[string]string{{"type": "Ready", "status": cond}},
		},
	})
}

// Pod is a Pod manifest with labels and one container, for a selector to
// find.
func Pod(name string, labels map[string]string) string {
	var l strings.Builder
	for k, v := range labels {
		l.WriteString("    " + k + ": " + v + "\n")
	}
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: ` + Namespace + `
  labels:
` + l.String() + `spec:
  containers:
  - {name: engine, image: vllm/vllm-openai}
`
}
