package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
	"github.com/llmedge/llmedge/internal/kubetest"
)

// The Kubernetes source (docs/kubernetes.md) against a real API server and
// etcd. EndpointSlices refuse loopback addresses, so the test runs in a
// private network namespace of its own (kubetest.PrivateNetwork) where the
// replicas listen on 10.77.0.x addresses of its loopback, as Pods of a
// cluster would on theirs; the API server, etcd and the gateway run there
// too. The gateway reads the API as a read-only identity (a Role granting
// get, list and watch on endpointslices, pods and inferencepools).

// kubeSlice is an EndpointSlice of Service qwen, port "http"; each
// endpoint is "ip=ready".
func kubeSlice(name string, port int, endpoints ...string) string {
	var eps strings.Builder
	for _, e := range endpoints {
		ip, ready, _ := strings.Cut(e, "=")
		terminating := "false"
		if ready == "false" {
			terminating = "true" // as a Pod being deleted: still serving, not ready
		}
		fmt.Fprintf(&eps, "- {addresses: [%q], conditions: {ready: %s, serving: true, terminating: %s}, zone: eu-1a}\n", ip, ready, terminating)
	}
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: default
  labels: {kubernetes.io/service-name: qwen}
addressType: IPv4
ports: [{name: http, port: %d, protocol: TCP}]
endpoints:
%s`, name, port, eps.String())
}

func TestKubernetesSource(t *testing.T) {
	needBinaries(t)
	ips := []string{"10.77.0.11", "10.77.0.12", "10.77.0.13"}
	if !kubetest.PrivateNetwork(t, ips, e2eBinEnv+"="+binDir) {
		return // it ran in its namespace
	}
	c := kubetest.Start(t)
	// A Service's endpoints share its port: one port on every address.
	port := freeport.Must(t)
	sims := map[string]*Sim{}
	for _, ip := range ips {
		sims[ip] = startSim(t, "-addr", fmt.Sprintf("%s:%d", ip, port), "-tokens", "100", "-itl", "30ms", "-seed", "4") // 3 s streams
	}
	s11, s12, s13 := sims[ips[0]], sims[ips[1]], sims[ips[2]]
	clean := startSim(t, "-tokens", "100", "-seed", "4")

	c.Apply(t, kubeSlice("qwen-a", port, "10.77.0.11=true", "10.77.0.12=true"))
	c.InstallInferencePoolCRD(t)
	c.Apply(t, fmt.Sprintf(`apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: gemma, namespace: default}
spec:
  selector: {matchLabels: {app: gemma}}
  targetPorts: [{number: %d}]
  endpointPickerRef: {name: gemma-epp, port: {number: 9002}}
`, port))
	for i, ip := range []string{"10.77.0.11", "10.77.0.13", "10.77.0.12"} {
		name := fmt.Sprintf("gemma-%d", i)
		c.Apply(t, kubetest.Pod(name, map[string]string{"app": "gemma"}))
		c.SetPodStatus(t, name, ip, i < 2) // gemma-2 not ready
	}

	source := func(lines string) string {
		return "\t\t\tsource kubernetes {\n" + lines + "\t\t\t\tkubeconfig " + c.GatewayKubeconfig + "\n\t\t\t}\n\t\t\tlb_policy round_robin"
	}
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  source("\t\t\t\tservice qwen\n\t\t\t\tport http\n"),
		"gemma": source("\t\t\t\tinference_pool gemma\n"),
		"clean": staticModel(clean),
	}})
	tok := g.Token(t, "demo", "demo", "")

	// The pool's ready Pods are gemma's replicas: the not-ready one gets nothing.
	g.waitReplicas(t, "gemma", 2, 20*time.Second)
	shortAnswers(t, g, tok, "gemma", 4)
	if a, b, n := s11.Stats(t).Requests, s13.Stats(t).Requests, s12.Stats(t).Requests; a != 2 || b != 2 || n != 0 {
		t.Fatalf("gemma: requests %d and %d on the ready pods, %d on the not-ready one; want 2, 2, 0", a, b, n)
	}

	// Two ready endpoints: both answer.
	g.waitReplicas(t, "qwen", 2, 20*time.Second)
	before11, before12 := s11.Stats(t).Requests, s12.Stats(t).Requests
	shortAnswers(t, g, tok, "qwen", 4)
	if a, b := s11.Stats(t).Requests-before11, s12.Stats(t).Requests-before12; a != 2 || b != 2 {
		t.Fatalf("qwen: %d and %d requests on its two endpoints, want 2 and 2", a, b)
	}

	// An endpoint marked not ready (terminating) drains: its streams end
	// whole on it, new requests go to the other.
	wait := drainStreams(t, g, tok, "qwen", "not ready", 4)
	inFlight := s12.Stats(t).InFlight
	if inFlight == 0 {
		t.Fatal("no stream in flight on the endpoint about to be not ready")
	}
	before := s12.Stats(t)
	c.Apply(t, kubeSlice("qwen-a", port, "10.77.0.11=true", "10.77.0.12=false"))
	g.waitReplicas(t, "qwen", 1, 5*time.Second)
	shortAnswers(t, g, tok, "qwen", 3)
	checkDrained(t, g, tok, "not ready", wait())
	if after := s12.Stats(t); after.Requests != before.Requests || after.Completed != before.Completed+inFlight || after.Cancelled != before.Cancelled {
		t.Errorf("not-ready endpoint went from %+v to %+v; want no new request and its %d streams completed", before, after, inFlight)
	}

	// A new slice's endpoint joins the rotation.
	c.Apply(t, kubeSlice("qwen-b", port, "10.77.0.13=true"))
	g.waitReplicas(t, "qwen", 2, 5*time.Second)
	before13 := s13.Stats(t).Requests
	shortAnswers(t, g, tok, "qwen", 4)
	if n := s13.Stats(t).Requests - before13; n != 2 {
		t.Fatalf("new endpoint: %d of 4 requests, want 2", n)
	}

	// The API server stopped: the last known good set keeps serving. Its
	// history is compacted meanwhile, so that the watch from the old
	// version is answered 410 Gone once it is back, and the source lists again.
	for i := range 3 {
		c.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: churn-%d, namespace: default}\n", i))
	}
	c.StopAPIServer(t)
	c.CompactEtcd(t)
	before11, before13 = s11.Stats(t).Requests, s13.Stats(t).Requests
	shortAnswers(t, g, tok, "qwen", 4)
	if a, b := s11.Stats(t).Requests-before11, s13.Stats(t).Requests-before13; a != 2 || b != 2 {
		t.Fatalf("API down: %d and %d requests on the last known endpoints, want 2 and 2", a, b)
	}
	if n := g.replicas(t, "qwen"); n != 2 {
		t.Fatalf("API down: %d replicas, want the last known 2", n)
	}

	// Restarted: changes are seen again.
	c.StartAPIServer(t)
	c.Apply(t, kubeSlice("qwen-a", port, "10.77.0.11=true", "10.77.0.12=true"))
	g.waitReplicas(t, "qwen", 3, 30*time.Second)
	if !strings.Contains(g.Log(), "kubernetes API reachable again") {
		t.Error("the gateway did not log the API back")
	}
}
