package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
	"github.com/llmedge/llmedge/internal/kubetest"
)

// deployCaddyfile is the Caddyfile the Kubernetes manifests ship as their
// ConfigMap (kustomization.yaml generates it from this file;
// TestDeployManifests holds the ConfigMap the API server sees to it).
const deployCaddyfile = "../deploy/kubernetes/Caddyfile"

// podFiles are what a gateway pod has mounted: the Secret llmedge-secrets
// (hmac-secret, cache-secret, users.json) and the Secret llmedge-tls
// (tls.crt, tls.key), made as docs/deploy.md tells an operator to.
type podFiles struct {
	secrets, tls string
	// roots trusts the certificate of tls.crt.
	roots *x509.CertPool
}

// makePodFiles writes the two Secrets' files into dir: a users file with
// demo/demo, random secrets made as docs/deploy.md's commands make them,
// and a certificate for llmedge.example.com, localhost and 127.0.0.1.
func makePodFiles(t *testing.T, dir string) podFiles {
	t.Helper()
	f := podFiles{secrets: filepath.Join(dir, "secrets"), tls: filepath.Join(dir, "tls")}
	for _, d := range []string{f.secrets, f.tls} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	random := func(n int) string {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(b) // as `openssl rand -hex n`
	}
	users, _ := json.Marshal(map[string]any{"users": []map[string]any{{"username": "demo", "password_hash": demoHash}}})
	files := map[string]string{
		filepath.Join(f.secrets, "hmac-secret"):  random(32),
		filepath.Join(f.secrets, "cache-secret"): random(32),
		filepath.Join(f.secrets, "users.json"):   string(users),
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llmedge.example.com"},
		DNSNames:    []string{"llmedge.example.com", "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files[filepath.Join(f.tls, "tls.crt")] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	files[filepath.Join(f.tls, "tls.key")] = string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, _ := x509.ParseCertificate(der)
	f.roots = x509.NewCertPool()
	f.roots.AddCert(cert)
	return f
}

// podCaddyfile writes the ConfigMap's Caddyfile into dir as a pod would
// run it here: with `kubeconfig` in its Kubernetes source, the one thing a
// pod has from its service account (the in-cluster credentials) and this
// machine has not. It returns the file's path.
func podCaddyfile(t *testing.T, dir, kubeconfig string) string {
	t.Helper()
	b, err := os.ReadFile(deployCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	const source = "\t\t\tsource kubernetes vllm-qwen {\n"
	if !bytes.Contains(b, []byte(source)) {
		t.Fatalf("%s has no %q", deployCaddyfile, source)
	}
	b = bytes.Replace(b, []byte(source), []byte(source+"\t\t\t\tkubeconfig "+kubeconfig+"\n"), 1)
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// unreachableKubeconfig is a kubeconfig of an API server that is not
// there: the gateway must load, serve and be ready all the same.
func unreachableKubeconfig(t *testing.T, dir string, f podFiles) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	kc := kubetest.Kubeconfig(fmt.Sprintf("https://127.0.0.1:%d", freeport.Must(t)), filepath.Join(f.tls, "tls.crt"), "llmedge", "no-token", "llmedge")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// podEnv is the environment of a gateway pod, with this machine's folders
// and free ports in place of the pod's (the Caddyfile's placeholders).
func podEnv(f podFiles, data string, port, admin, metrics, status int) []string {
	return []string{
		"LLMEDGE_SECRETS=" + f.secrets, "LLMEDGE_TLS=" + f.tls, "LLMEDGE_DATA=" + data,
		fmt.Sprintf("LLMEDGE_PORT=%d", port), fmt.Sprintf("LLMEDGE_ADMIN=127.0.0.1:%d", admin),
		fmt.Sprintf("LLMEDGE_METRICS_PORT=%d", metrics), fmt.Sprintf("LLMEDGE_STATUS_PORT=%d", status),
	}
}

// TestDeployCaddyfileValidates: `llmedge validate` accepts the ConfigMap's
// Caddyfile with the pod's Secrets in place, without a warning of its own
// (no unset placeholder): the only ones allowed are of this test's making
// (its certificate's short life, its Kubernetes API that is not there).
func TestDeployCaddyfileValidates(t *testing.T) {
	needBinaries(t)
	dir := t.TempDir()
	f := makePodFiles(t, dir)
	conf := podCaddyfile(t, dir, unreachableKubeconfig(t, dir, f))
	cmd := exec.Command(filepath.Join(binDir, "llmedge"), "validate", "--config", conf, "--adapter", "caddyfile")
	cmd.Env = append(append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir),
		podEnv(f, filepath.Join(dir, "data"), freeport.Must(t), freeport.Must(t), freeport.Must(t), freeport.Must(t))...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("llmedge validate %s: %v\n%s", deployCaddyfile, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		ours := strings.Contains(l, "unmanaged certificate expires") || strings.Contains(l, `"logger":"llmedge.kubernetes"`) ||
			strings.Contains(l, "replica source not synced yet")
		if (strings.Contains(l, `"level":"warn"`) || strings.HasPrefix(l, "WARNING")) && !ours {
			t.Errorf("validate warns: %s", l)
		}
	}
}

// startPod starts a gateway as a pod of the Deployment runs it: the
// ConfigMap's Caddyfile, the Secrets' files, a storage of its own (the
// pod's emptyDir).
func startPod(t *testing.T, f podFiles, kubeconfig string) *Gateway {
	t.Helper()
	needBinaries(t)
	g := &Gateway{dir: t.TempDir(), bin: filepath.Join(binDir, "llmedge")}
	g.data = filepath.Join(g.dir, "data")
	g.conf = podCaddyfile(t, g.dir, kubeconfig)
	for try := 1; ; try++ {
		g.port, g.adminPort = freeport.Must(t), freeport.Must(t)
		g.Extra = []int{freeport.Must(t), freeport.Must(t)} // metrics, status
		g.env = podEnv(f, g.data, g.port, g.adminPort, g.Extra[0], g.Extra[1])
		g.Base = fmt.Sprintf("https://localhost:%d", g.port)
		g.Admin = fmt.Sprintf("http://127.0.0.1:%d", g.adminPort)
		err := g.launchPod(f)
		if err == nil {
			break
		}
		if try == 5 || !freeport.AddrInUse(g.log.String()) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { g.Stop(t) })
	return g
}

// launchPod is launch for a gateway whose certificate is a file, not
// Caddy's internal CA's: it waits for /healthz with a client trusting f.
func (g *Gateway) launchPod(f podFiles) error {
	g.log = new(syncBuffer)
	g.cmd = exec.Command(g.bin, "run", "--config", g.conf, "--adapter", "caddyfile")
	g.cmd.Env = append(append(os.Environ(), "HOME="+g.dir, "XDG_DATA_HOME="+g.dir, "XDG_CONFIG_HOME="+g.dir), g.env...)
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		return err
	}
	g.done = make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	g.Client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.roots}}}
	exited := false
	if pollEvery(60*time.Second, 100*time.Millisecond, func() bool {
		select {
		case <-g.done:
			exited = true
			return true
		default:
		}
		resp, err := g.Client.Get(g.Base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) && !exited {
		return nil
	}
	if !exited {
		_ = g.cmd.Process.Kill()
		<-g.done
	}
	return fmt.Errorf("the pod's gateway did not serve:\n%s", g.log)
}

// kubeletGet GETs path on 127.0.0.1:port as a kubelet's HTTPS probe does:
// to the pod's address (no SNI, the address as Host), without checking the
// certificate.
func kubeletGet(t *testing.T, port int, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's probes
	}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, path))
	if err != nil {
		t.Fatalf("probe %s: %v", path, err)
	}
	return resp.StatusCode, readAllString(resp)
}

// readAllString reads and closes resp's body.
func readAllString(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDeployPodServesProbesAndSharesTokens runs two pods of the Deployment
// (the ConfigMap's Caddyfile, the same Secrets, storage of their own) and
// checks what the manifests rely on: the kubelet's probes (liveness
// /healthz, readiness /readyz over HTTPS to the pod's address, with no
// model up: a model down must not make a pod unready), the image's
// HEALTHCHECK command, the certificate of the Secret served by name, the
// metrics port, and a token issued by one pod accepted by the other (the
// signing key is the Secret's, not each pod's own). The Kubernetes API is
// not there: a pod must serve and be ready all the same.
func TestDeployPodServesProbesAndSharesTokens(t *testing.T) {
	dir := t.TempDir()
	f := makePodFiles(t, dir)
	kc := unreachableKubeconfig(t, dir, f)
	a, b := startPod(t, f, kc), startPod(t, f, kc)

	for _, p := range []struct {
		path string
		want int
	}{{"/healthz", 200}, {"/readyz", 200}} {
		if code, body := kubeletGet(t, a.port, p.path); code != p.want {
			t.Errorf("probe %s: %d %s, want %d", p.path, code, body, p.want)
		}
	}
	// The model's replicas are not there: its own readiness says so, the
	// instance's does not.
	if code, _ := kubeletGet(t, a.port, "/readyz/qwen"); code != 503 {
		t.Errorf("/readyz/qwen with no replica: %d, want 503", code)
	}

	hc := exec.Command(a.bin, "healthcheck")
	hc.Env = append(os.Environ(), fmt.Sprintf("LLMEDGE_PORT=%d", a.port))
	if out, err := hc.CombinedOutput(); err != nil {
		t.Errorf("caddy healthcheck (the image's HEALTHCHECK): %v\n%s", err, out)
	}

	// Clients reach the pods under the certificate's name.
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", a.port), &tls.Config{ServerName: "llmedge.example.com", RootCAs: f.roots})
	if err != nil {
		t.Errorf("TLS as llmedge.example.com with the Secret's certificate: %v", err)
	} else {
		conn.Close()
	}

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", a.Extra[0]))
	if err != nil {
		t.Fatal(err)
	}
	if m := readAllString(resp); resp.StatusCode != 200 || !strings.Contains(m, "llmedge_") {
		t.Errorf("metrics port: %d, llmedge's metrics present: %v", resp.StatusCode, strings.Contains(m, "llmedge_"))
	}

	tok := a.Token(t, "demo", "demo", "")
	for _, g := range []*Gateway{a, b} {
		req, _ := http.NewRequest("GET", g.Base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAllString(resp)
		if resp.StatusCode != 200 || !strings.Contains(body, `"qwen"`) {
			t.Errorf("pod on %d with a token of the pod on %d: %d %s", g.port, a.port, resp.StatusCode, body)
		}
	}
}
