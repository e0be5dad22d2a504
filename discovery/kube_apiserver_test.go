package discovery_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/internal/kubetest"
)

// kubeWatch starts a watcher as the gateway's read-only identity and stops
// it when the test ends.
func kubeWatch(t *testing.T, kubeconfig string, wc discovery.KubeWatchConfig) *discovery.KubeWatcher {
	t.Helper()
	wc.MinBackoff, wc.MaxBackoff = 50*time.Millisecond, 300*time.Millisecond
	w, err := discovery.NewKubeWatcher(discovery.KubeCredentials{Kubeconfig: kubeconfig}, wc, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !w.WaitSynced(ctx) {
		t.Fatalf("not synced: %+v", w.Status())
	}
	return w
}

// waitURLs waits until the watcher's set is want (URLs, sorted).
func waitURLs(t *testing.T, w *discovery.KubeWatcher, what string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		list, _ := w.Instances()
		got = got[:0]
		for _, in := range list {
			got = append(got, in.URL)
		}
		if slices.Equal(got, want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: replicas %q, want %q (status %+v)", what, got, want, w.Status())
}

func endpointSlice(name, service string, endpoints ...string) string {
	var eps strings.Builder
	for _, e := range endpoints {
		addr, ready, _ := strings.Cut(e, "=")
		fmt.Fprintf(&eps, "- {addresses: [%q], conditions: {ready: %s}, zone: eu-1a}\n", addr, ready)
	}
	return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `
  namespace: default
  labels: {kubernetes.io/service-name: ` + service + `}
addressType: IPv4
ports:
- {name: http, port: 8000}
- {name: metrics, port: 9090}
endpoints:
` + eps.String()
}

// A Service's slices followed through a real API server: ready endpoints
// only, changes seen at once, the last known good set kept while the API
// is down, changes seen again once it is back (after a 410 Gone, the
// history having been compacted meanwhile, which forces a new list).
func TestKubeWatcherFollowsEndpointSlices(t *testing.T) {
	c := kubetest.Start(t)
	c.Apply(t, endpointSlice("qwen-a", "qwen", "10.77.0.11=true", "10.77.0.12=true", "10.77.0.13=false"))
	c.Apply(t, endpointSlice("other-a", "other", "10.77.0.99=true"))
	w := kubeWatch(t, c.GatewayKubeconfig, discovery.KubeWatchConfig{Service: "qwen", Port: "http"})
	waitURLs(t, w, "two ready endpoints", "http://10.77.0.11:8000", "http://10.77.0.12:8000")
	if list, _ := w.Instances(); list[0].Zone != "eu-1a" {
		t.Errorf("zone %q, want eu-1a", list[0].Zone)
	}

	c.Apply(t, endpointSlice("qwen-a", "qwen", "10.77.0.11=true", "10.77.0.12=false", "10.77.0.13=false"))
	waitURLs(t, w, "one endpoint not ready", "http://10.77.0.11:8000")
	c.Apply(t, endpointSlice("qwen-b", "qwen", "10.77.0.14=true"))
	waitURLs(t, w, "a new slice", "http://10.77.0.11:8000", "http://10.77.0.14:8000")

	// Move the history on and compact it, so that the watcher's version is
	// gone once the API server starts again.
	for i := range 5 {
		c.Apply(t, endpointSlice("other-a", "other", fmt.Sprintf("10.77.1.%d=true", i+1)))
	}
	c.CompactEtcd(t)
	c.StopAPIServer(t)
	deadline := time.Now().Add(10 * time.Second)
	for w.Status().LastError == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := w.Status()
	if st.LastError == "" || !st.Synced || st.Instances != 2 {
		t.Fatalf("API down: status %+v, want an error and the last known good 2 replicas", st)
	}
	waitURLs(t, w, "API down: last known good", "http://10.77.0.11:8000", "http://10.77.0.14:8000")

	c.StartAPIServer(t)
	c.Delete(t, "endpointslice", "qwen-b")
	waitURLs(t, w, "API back, a slice deleted", "http://10.77.0.11:8000")
	if w.Status().LastError != "" {
		t.Errorf("API back: status %+v still has an error", w.Status())
	}
	if w.Relists() == 0 {
		t.Error("the watch from a compacted version was not answered 410 Gone and listed again")
	}
}

// A client certificate in the kubeconfig authenticates as well as a token;
// a namespace without the Role's grant is refused, and reported.
func TestKubeWatcherClientCertificateAndForbidden(t *testing.T) {
	c := kubetest.Start(t)
	c.Apply(t, endpointSlice("qwen-a", "qwen", "10.77.0.11=true"))
	cert, key := c.ClientCert(t, kubetest.GatewayUser)
	kc := filepath.Join(t.TempDir(), "config")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: x
clusters: [{name: k, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: x, context: {cluster: k, user: u}}]
`, c.URL, c.CAFile, cert, key)
	if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	w := kubeWatch(t, kc, discovery.KubeWatchConfig{Service: "qwen", Port: "http"})
	waitURLs(t, w, "client certificate", "http://10.77.0.11:8000")
	if w.Status().Service != "service default/qwen" {
		t.Errorf("status names %q", w.Status().Service)
	}

	denied, err := discovery.NewKubeWatcher(discovery.KubeCredentials{Kubeconfig: c.GatewayKubeconfig},
		discovery.KubeWatchConfig{Service: "qwen", Namespace: "kube-system"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	denied.Start()
	defer denied.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(denied.Status().LastError, "403") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if st := denied.Status(); st.Synced || !strings.Contains(st.LastError, "403") {
		t.Errorf("another namespace: status %+v, want unsynced with a 403", st)
	}
}

// An InferencePool's ready Pods on its target port, followed as the Pods'
// readiness and the pool's selector change.
func TestKubeWatcherFollowsInferencePool(t *testing.T) {
	c := kubetest.Start(t)
	c.InstallInferencePoolCRD(t)
	c.Apply(t, `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: gemma, namespace: default}
spec:
  selector: {matchLabels: {app: gemma}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {name: gemma-epp, port: {number: 9002}}
`)
	for i, ready := range []bool{true, true, false} {
		name := fmt.Sprintf("gemma-%d", i)
		c.Apply(t, kubetest.Pod(name, map[string]string{"app": "gemma", "track": map[bool]string{true: "canary", false: "stable"}[i == 1]}))
		c.SetPodStatus(t, name, fmt.Sprintf("10.77.0.%d", 21+i), ready)
	}
	c.Apply(t, kubetest.Pod("qwen-0", map[string]string{"app": "qwen"}))
	c.SetPodStatus(t, "qwen-0", "10.77.0.31", true)

	w := kubeWatch(t, c.GatewayKubeconfig, discovery.KubeWatchConfig{InferencePool: "gemma"})
	waitURLs(t, w, "ready pods of the pool", "http://10.77.0.21:8000", "http://10.77.0.22:8000")

	c.SetPodStatus(t, "gemma-2", "10.77.0.23", true)
	c.SetPodStatus(t, "gemma-0", "10.77.0.21", false)
	waitURLs(t, w, "readiness changed", "http://10.77.0.22:8000", "http://10.77.0.23:8000")

	c.MergePatch(t, "/apis/inference.networking.k8s.io/v1/namespaces/default/inferencepools/gemma",
		map[string]any{"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]string{"track": "canary"}}, "targetPorts": []map[string]int{{"number": 8001}}}})
	waitURLs(t, w, "selector and port changed", "http://10.77.0.22:8001")

	c.Delete(t, "pod", "gemma-1")
	waitURLs(t, w, "pod deleted")
}
