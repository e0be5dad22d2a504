package discovery

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func testKubeWatcher(wc KubeWatchConfig) *KubeWatcher {
	if wc.Scheme == "" {
		wc.Scheme = "http"
	}
	if wc.Namespace == "" {
		wc.Namespace = "llm"
	}
	return &KubeWatcher{cfg: wc, logger: zap.NewNop()}
}

func raws(t *testing.T, objs ...string) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for i, o := range objs {
		if !json.Valid([]byte(o)) {
			t.Fatalf("invalid JSON %d: %s", i, o)
		}
		out[string(rune('a'+i))] = json.RawMessage(o)
	}
	return out
}

func urlsAndZones(list []Instance) []string {
	var out []string
	for _, in := range list {
		out = append(out, in.URL+"|"+in.Zone)
	}
	return out
}

func TestKubeFromSlices(t *testing.T) {
	slice1 := `{"addressType":"IPv4","ports":[{"name":"http","port":8000},{"name":"metrics","port":9000}],"endpoints":[
		{"addresses":["10.0.0.1"],"conditions":{"ready":true},"zone":"eu-1a","targetRef":{"name":"qwen-0"}},
		{"addresses":["10.0.0.2"],"conditions":{"ready":false,"serving":true,"terminating":true}},
		{"addresses":["10.0.0.3"],"conditions":{}},
		{"addresses":[],"conditions":{"ready":true}}]}`
	slice2 := `{"addressType":"IPv6","ports":[{"name":"http","port":8000,"appProtocol":"https"}],"endpoints":[
		{"addresses":["fd00::4"],"conditions":{"ready":true},"zone":"eu-1b"},
		{"addresses":["10.0.0.1"],"conditions":{"ready":true}}]}`
	single := `{"addressType":"IPv4","ports":[{"port":8080}],"endpoints":[{"addresses":["10.0.0.9"],"conditions":{"ready":true}}]}`
	for _, tc := range []struct {
		name   string
		port   string
		slices []string
		want   []string
	}{
		{"named port; not-ready and terminating out; nil ready counts as ready; appProtocol https", "http",
			[]string{slice1, slice2}, []string{"http://10.0.0.1:8000|eu-1a", "http://10.0.0.3:8000|", "https://10.0.0.1:8000|", "https://[fd00::4]:8000|eu-1b"}},
		{"port by number", "9000", []string{slice1}, []string{"http://10.0.0.1:9000|eu-1a", "http://10.0.0.3:9000|"}},
		{"no port named, several: slice skipped", "", []string{slice1}, nil},
		{"no port named, one: used", "", []string{single}, []string{"http://10.0.0.9:8080|"}},
		{"unknown port name", "grpc", []string{slice1, single}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testKubeWatcher(KubeWatchConfig{Service: "qwen", Port: tc.port})
			got := urlsAndZones(w.fromSlices(raws(t, tc.slices...)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestKubeFromPods(t *testing.T) {
	pod := func(name, ip, ready string, deleting bool) string {
		del := ""
		if deleting {
			del = `,"deletionTimestamp":"2026-11-27T21:00:00Z"`
		}
		return `{"metadata":{"name":"` + name + `"` + del + `},"status":{"podIP":"` + ip + `","conditions":[{"type":"PodScheduled","status":"True"},{"type":"Ready","status":"` + ready + `"}]}}`
	}
	objs := raws(t, pod("p0", "10.0.0.1", "True", false), pod("p1", "10.0.0.2", "False", false),
		pod("p2", "10.0.0.3", "True", true), pod("p3", "", "True", false), pod("p4", "10.0.0.5", "True", false))
	w := testKubeWatcher(KubeWatchConfig{InferencePool: "pool"})
	got := urlsAndZones(w.fromPods(objs, []int{8000, 8001}))
	want := []string{"http://10.0.0.1:8000|", "http://10.0.0.1:8001|", "http://10.0.0.5:8000|", "http://10.0.0.5:8001|"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestKubePoolSpec(t *testing.T) {
	for _, tc := range []struct {
		name, port, pool string
		want             *poolSpec
	}{
		{"labels sorted, every port", "", `{"spec":{"selector":{"matchLabels":{"b":"2","a":"1"}},"targetPorts":[{"number":8000},{"number":8001}]}}`,
			&poolSpec{selector: "a=1,b=2", ports: []int{8000, 8001}}},
		{"one port chosen", "8001", `{"spec":{"selector":{"matchLabels":{"app":"q"}},"targetPorts":[{"number":8000},{"number":8001}]}}`,
			&poolSpec{selector: "app=q", ports: []int{8001}}},
		{"chosen port absent", "9", `{"spec":{"selector":{"matchLabels":{"app":"q"}},"targetPorts":[{"number":8000}]}}`, nil},
		{"empty selector would pick every Pod", "", `{"spec":{"selector":{"matchLabels":{}},"targetPorts":[{"number":8000}]}}`, nil},
		{"missing pool", "", ``, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testKubeWatcher(KubeWatchConfig{InferencePool: "pool", Port: tc.port})
			var raw json.RawMessage
			if tc.pool != "" {
				raw = json.RawMessage(tc.pool)
			}
			got := w.poolSpec(raw)
			if (got == nil) != (tc.want == nil) || got != nil && !got.equal(tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestKubeconfigCredentials(t *testing.T) {
	dir := t.TempDir()
	ca := selfSignedPEM(t)
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(body string) string {
		p := filepath.Join(dir, "config")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:6443/", certificate-authority: ca.crt}
- name: c2
  cluster: {server: "https://k8s.example:443", certificate-authority-data: ` + base64.StdEncoding.EncodeToString(ca) + `}
users:
- name: u1
  user: {token: inline-token}
- name: u2
  user: {tokenFile: token}
- name: u3
  user: {exec: {command: aws}}
contexts:
- name: a
  context: {cluster: c1, user: u1, namespace: llm}
- name: b
  context: {cluster: c2, user: u2}
- name: c
  context: {cluster: c1, user: u3}
- name: d
  context: {cluster: nope, user: u1}
`
	path := write(cfg)
	k, err := kubeconfigClient(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := k.bearer(); k.base != "https://10.0.0.1:6443" || tok != "inline-token" || k.namespace != "llm" || k.transport.TLSClientConfig.RootCAs == nil {
		t.Errorf("context a: base %q token %q namespace %q", k.base, tok, k.namespace)
	}
	k, err = kubeconfigClient(path, "b")
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := k.bearer(); k.base != "https://k8s.example:443" || tok != "file-token" || k.namespace != "" {
		t.Errorf("context b: base %q token %q namespace %q", k.base, tok, k.namespace)
	}
	for ctx, want := range map[string]string{
		"c": "exec and auth-provider credentials are not supported",
		"d": `names cluster "nope"`,
		"e": `no context "e"`,
	} {
		if _, err := kubeconfigClient(path, ctx); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("context %s: got %v, want %q", ctx, err, want)
		}
	}
	if _, err := kubeconfigClient(write("clusters: [oops"), ""); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("bad YAML: %v", err)
	}
}

func TestKubeInClusterCredentials(t *testing.T) {
	dir := t.TempDir()
	old := serviceAccountDir
	serviceAccountDir = dir
	t.Cleanup(func() { serviceAccountDir = old })
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, err := newKubeClient(KubeCredentials{}); err == nil || !strings.Contains(err.Error(), "not in a cluster") {
		t.Fatalf("outside a cluster: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	for name, body := range map[string][]byte{"ca.crt": selfSignedPEM(t), "token": []byte("sa-token\n"), "namespace": []byte("llm\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k, err := newKubeClient(KubeCredentials{})
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := k.bearer(); k.base != "https://[fd00::1]:443" || tok != "sa-token" || k.namespace != "llm" {
		t.Errorf("in cluster: base %q token %q namespace %q", k.base, tok, k.namespace)
	}
}

func TestNewKubeWatcherRefusesBadSettings(t *testing.T) {
	for wc, want := range map[KubeWatchConfig]string{
		{}:                                  "name a service or an inference_pool",
		{Service: "a", InferencePool: "b"}:  "name a service or an inference_pool",
		{Service: "a", Scheme: "grpc"}:      "want http or https",
		{InferencePool: "a", Port: "http"}:  "target port is a number",
		{InferencePool: "a", Port: "70000"}: "target port is a number",
	} {
		if _, err := NewKubeWatcher(KubeCredentials{Kubeconfig: "/nonexistent"}, wc, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want %q", wc, err, want)
		}
	}
}

func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
