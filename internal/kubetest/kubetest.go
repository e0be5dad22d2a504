// Package kubetest runs a real Kubernetes API server for tests: etcd and
// kube-apiserver on free loopback ports, with static tokens for an admin
// (system:masters) and for the gateway (user llmedge-gateway, bound to a
// read-only Role on endpointslices, pods and inferencepools). No controller
// manager, scheduler or kubelet runs: tests write Services, EndpointSlices,
// Pods (and their status, through the status subresource) themselves, as
// the admin.
//
// The binaries are <repo>/bin/kube-apiserver, bin/etcd and bin/kubectl
// (built by `make kube` from the pinned tools module), or the paths in
// $LLMEDGE_KUBE_APISERVER_BIN, $LLMEDGE_ETCD_BIN and $LLMEDGE_KUBECTL_BIN.
// Under `go test -short` a missing binary skips the test; otherwise it fails
// it, so CI cannot silently lose the Kubernetes tests.
package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
)

// Environment variables overriding the binaries' paths.
const (
	APIServerEnv = "LLMEDGE_KUBE_APISERVER_BIN"
	EtcdEnv      = "LLMEDGE_ETCD_BIN"
	KubectlEnv   = "LLMEDGE_KUBECTL_BIN"
)

// Identities of the static tokens.
const (
	AdminUser   = "kube-admin"
	GatewayUser = "llmedge-gateway"
	// Namespace is where the gateway's Role is and where tests put objects.
	Namespace = "default"
)

// Binary returns the path of a binary of bin/ (name is kube-apiserver, etcd
// or kubectl), skipping (with -short) or failing the test when missing.
func Binary(t testing.TB, name string) string {
	t.Helper()
	env := map[string]string{"kube-apiserver": APIServerEnv, "etcd": EtcdEnv, "kubectl": KubectlEnv}[name]
	path := os.Getenv(env)
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		path = filepath.Join(root, "bin", name)
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("%s is missing: run `make kube` (builds kube-apiserver and kubectl v1.37.2 and etcd v3.6.16 from tools/kube) or set %s", path, env)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return path
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(strings.TrimSpace(string(b)), "module github.com/llmedge/llmedge\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no github.com/llmedge/llmedge go.mod above the working directory")
		}
		dir = parent
	}
}

// Cluster is a running etcd and API server.
type Cluster struct {
	// URL is the API server's base URL, https://127.0.0.1:PORT.
	URL string
	// CAFile holds the CA that signed the serving certificate; CA is its PEM.
	CAFile string
	CA     []byte
	// AdminToken is the admin's bearer token (system:masters).
	AdminToken string
	// GatewayToken is the read-only gateway identity's token.
	GatewayToken string
	// AdminKubeconfig and GatewayKubeconfig are kubeconfig files for them.
	AdminKubeconfig   string
	GatewayKubeconfig string
	// Dir is the cluster's working folder (certificates, etcd data).
	Dir string

	client  *http.Client
	kubectl string
	pki     *pki

	mu        sync.Mutex
	etcd      *proc
	apiserver *proc
	etcdArgs  []string
	apiArgs   []string
	apiBin    string
}

// Start runs etcd and kube-apiserver and stops them when the test ends. It
// returns once the API server answers /readyz and the gateway's Role exists.
func Start(t testing.TB) *Cluster {
	t.Helper()
	apiBin, etcdBin := Binary(t, "kube-apiserver"), Binary(t, "etcd")
	c := &Cluster{Dir: t.TempDir(), kubectl: Binary(t, "kubectl"), apiBin: apiBin,
		AdminToken: "admin-" + randomHex(16), GatewayToken: "gateway-" + randomHex(16)}
	if err := c.writeFiles(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	var err error
	for try := 1; try <= 5; try++ {
		if err = c.startEtcd(etcdBin); err == nil {
			break
		}
		if !freeport.AddrInUse(err.Error()) {
			t.Fatal(err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for try := 1; try <= 5; try++ {
		if err = c.startAPIServer(); err == nil {
			break
		}
		if !freeport.AddrInUse(err.Error()) {
			break
		}
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, c.logs())
	}
	if err := c.writeKubeconfigs(); err != nil {
		t.Fatal(err)
	}
	c.Apply(t, gatewayRBAC)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubernetes logs (last lines):\n%s", c.logs())
		}
	})
	return c
}

// gatewayRBAC is the gateway's read-only Role: what the Kubernetes source
// needs, nothing more.
const gatewayRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: llmedge-source, namespace: default}
rules:
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [inference.networking.k8s.io]
  resources: [inferencepools]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: llmedge-source, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: llmedge-source}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: llmedge-gateway}
`

func (c *Cluster) writeFiles() error {
	pki, err := newPKI(c.Dir)
	if err != nil {
		return err
	}
	c.pki, c.CAFile, c.CA = pki, pki.caFile, pki.caPEM
	tokens := fmt.Sprintf("%s,%s,uid-admin,\"system:masters\"\n%s,%s,uid-gateway\n",
		c.AdminToken, AdminUser, c.GatewayToken, GatewayUser)
	if err := os.WriteFile(filepath.Join(c.Dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CA)
	c.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c.apiArgs = []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--tls-cert-file=" + pki.certFile,
		"--tls-private-key-file=" + pki.keyFile,
		"--client-ca-file=" + pki.caFile,
		"--token-auth-file=" + filepath.Join(c.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pki.saPubFile,
		"--service-account-signing-key-file=" + pki.saKeyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		// Else it publishes its own (loopback) address as the kubernetes
		// Service's endpoint, which validation refuses.
		"--endpoint-reconciler-type=none",
		// No controller manager creates the namespaces' default service
		// accounts, which this plugin would want for every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--cert-dir=" + filepath.Join(c.Dir, "certs"),
		"--profiling=false",
		"--v=0",
	}
	return nil
}

func (c *Cluster) startEtcd(bin string) error {
	ports, err := freeport.GetN(2)
	if err != nil {
		return err
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	data := filepath.Join(c.Dir, "etcd")
	_ = os.RemoveAll(data)
	c.etcdArgs = []string{"--data-dir", data, "--name", "default",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default=" + peer, "--unsafe-no-fsync", "--log-level", "warn"}
	p, err := startProc(bin, c.etcdArgs)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(client + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				c.mu.Lock()
				c.etcd = p
				c.mu.Unlock()
				c.apiArgs = append(c.apiArgs, "--etcd-servers="+client)
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("etcd exited: %s", p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.kill()
	return fmt.Errorf("etcd did not become healthy in 30s: %s", lastLines(p.log.String(), 20))
}

func (c *Cluster) startAPIServer() error {
	port, err := freeport.Get()
	if err != nil {
		return err
	}
	c.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	args := append(append([]string(nil), c.apiArgs...), fmt.Sprintf("--secure-port=%d", port))
	p, err := startProc(c.apiBin, args)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.apiserver = p
	c.mu.Unlock()
	if err := c.waitReady(p, 90*time.Second); err != nil {
		p.kill()
		return err
	}
	return nil
}

func (c *Cluster) waitReady(p *proc, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		status, _, err := c.Do(context.Background(), http.MethodGet, "/readyz", nil)
		if err == nil && status == http.StatusOK {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("kube-apiserver exited: %s", lastLines(p.log.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready in %s: %s", within, lastLines(p.log.String(), 30))
}

// StopAPIServer stops the API server (etcd keeps running): clients see
// connections refused until StartAPIServer.
func (c *Cluster) StopAPIServer(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	p := c.apiserver
	c.apiserver = nil
	c.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// StartAPIServer starts the API server again on the same port and waits
// until it is ready.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	var port string
	_, port, _ = strings.Cut(strings.TrimPrefix(c.URL, "https://"), ":")
	args := append(append([]string(nil), c.apiArgs...), "--secure-port="+port)
	var err error
	for try := 0; try < 20; try++ { // the old process's port may linger a moment
		var p *proc
		if p, err = startProc(c.apiBin, args); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.apiserver = p
		c.mu.Unlock()
		if err = c.waitReady(p, 90*time.Second); err == nil {
			return
		}
		p.kill()
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatal(err)
}

// CompactEtcd compacts etcd's history up to its current revision, so that
// a watch from an older resourceVersion gets 410 Gone (once the API
// server's watch cache has moved past it too).
func (c *Cluster) CompactEtcd(t testing.TB) {
	t.Helper()
	var client string
	for i, a := range c.etcdArgs {
		if a == "--listen-client-urls" {
			client = c.etcdArgs[i+1]
		}
	}
	resp, err := http.Post(client+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"AA==","limit":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	err = json.NewDecoder(resp.Body).Decode(&rng)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Post(client+"/v3/kv/compaction", "application/json",
		strings.NewReader(fmt.Sprintf(`{"revision":%q,"physical":true}`, rng.Header.Revision)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd compaction: %d %s", resp.StatusCode, body)
	}
}

// Do sends a request to the API server as the admin and returns the
// status and body.
func (c *Cluster) Do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return c.do(ctx, c.AdminToken, method, path, body, "application/json")
}

// DoAs is Do with another token (the gateway's, to check its Role).
func (c *Cluster) DoAs(ctx context.Context, token, method, path string, body []byte) (int, []byte, error) {
	return c.do(ctx, token, method, path, body, "application/json")
}

func (c *Cluster) do(ctx context.Context, token, method, path string, body []byte, contentType string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// MergePatch applies a JSON merge patch as the admin (path names the
// object, or its /status subresource), failing the test on an error.
func (c *Cluster) MergePatch(t testing.TB, path string, patch any) {
	t.Helper()
	b, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := c.do(context.Background(), c.AdminToken, http.MethodPatch, path, b, "application/merge-patch+json")
	if err != nil || status/100 != 2 {
		t.Fatalf("PATCH %s: %d %v %s", path, status, err, body)
	}
}

// Apply applies YAML or JSON manifests (one or more documents) as the
// admin with kubectl, failing the test on an error.
func (c *Cluster) Apply(t testing.TB, manifests string) {
	t.Helper()
	if out, err := c.Kubectl(manifests, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// Delete deletes the named objects as the admin, e.g. Delete(t, "pod",
// "qwen-0").
func (c *Cluster) Delete(t testing.TB, kind string, names ...string) {
	t.Helper()
	args := append([]string{"delete", "--wait=false", kind}, names...)
	if out, err := c.Kubectl("", args...); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
}

// Kubectl runs kubectl as the admin with stdin, returning its combined
// output.
func (c *Cluster) Kubectl(stdin string, args ...string) ([]byte, error) {
	cmd := exec.Command(c.kubectl, append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd.CombinedOutput()
}

func (c *Cluster) writeKubeconfigs() error {
	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	c.GatewayKubeconfig = filepath.Join(c.Dir, "gateway.kubeconfig")
	if err := os.WriteFile(c.AdminKubeconfig, []byte(Kubeconfig(c.URL, c.CAFile, AdminUser, c.AdminToken, Namespace)), 0o600); err != nil {
		return err
	}
	return os.WriteFile(c.GatewayKubeconfig, []byte(Kubeconfig(c.URL, c.CAFile, GatewayUser, c.GatewayToken, Namespace)), 0o600)
}

// Kubeconfig renders a kubeconfig for a token, with the CA as a file.
func Kubeconfig(server, caFile, user, token, namespace string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: %s, namespace: %s}
current-context: test
`, server, caFile, user, token, user, namespace)
}

// logs returns the last lines of both processes' output.
func (c *Cluster) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	if c.etcd != nil {
		b.WriteString("etcd:\n" + lastLines(c.etcd.log.String(), 20) + "\n")
	}
	if c.apiserver != nil {
		b.WriteString("kube-apiserver:\n" + lastLines(c.apiserver.log.String(), 40) + "\n")
	}
	return b.String()
}

func (c *Cluster) stop() {
	c.mu.Lock()
	api, etcd := c.apiserver, c.etcd
	c.mu.Unlock()
	if api != nil {
		api.kill()
	}
	if etcd != nil {
		etcd.kill()
	}
}

// proc is a child process and its output.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *syncBuffer
}

func startProc(bin string, args []string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	p := &proc{cmd: cmd, done: make(chan struct{}), log: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
