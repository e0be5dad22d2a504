package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
)

// Demo is `make run`'s demo as scripts/run.sh starts it (the repository's
// own Caddyfile, four simulated replicas), on free ports: never the
// quickstart's 8443, 2019, 2020, 9101-9202, which a developer's own demo
// may hold.
type Demo struct {
	*Gateway
	// Work is the folder the README's commands run in: its .data/caddy
	// is the demo's storage, as the repository's is for `make run`.
	Work string
	// Status is the status page's base URL (http://127.0.0.1:PORT/).
	Status string
	// Ports maps each of the quickstart's addresses to this demo's.
	Ports map[string]string
	// Env is what run.sh was given.
	Env []string
}

// startDemo runs scripts/run.sh with the ports and storage of the test
// and the binaries TestMain built, and waits until both models are ready.
func startDemo(t testing.TB) *Demo {
	t.Helper()
	needBinaries(t)
	work := t.TempDir()
	port, admin, status := freeport.Must(t), freeport.Must(t), freeport.Must(t)
	q1, q2, g1, g2 := freeport.Must(t), freeport.Must(t), freeport.Must(t), freeport.Must(t)
	data := filepath.Join(work, ".data", "caddy")
	script, err := filepath.Abs("../scripts/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	d := &Demo{Work: work, Status: fmt.Sprintf("http://127.0.0.1:%d/", status)}
	d.Env = []string{
		"LLMEDGE_BIN=" + binDir,
		fmt.Sprintf("LLMEDGE_PORT=%d", port),
		fmt.Sprintf("LLMEDGE_ADMIN=127.0.0.1:%d", admin),
		fmt.Sprintf("LLMEDGE_STATUS_PORT=%d", status),
		fmt.Sprintf("LLMEDGE_QWEN_PORTS=%d %d", q1, q2),
		fmt.Sprintf("LLMEDGE_GEMMA_PORTS=%d %d", g1, g2),
		"LLMEDGE_DATA=" + data,
	}
	d.Ports = map[string]string{
		"localhost:8443": fmt.Sprintf("localhost:%d", port),
		"localhost:2019": fmt.Sprintf("127.0.0.1:%d", admin),
		"127.0.0.1:2020": fmt.Sprintf("127.0.0.1:%d", status),
		"localhost:2020": fmt.Sprintf("localhost:%d", status),
		"127.0.0.1:9101": fmt.Sprintf("127.0.0.1:%d", q1),
		"127.0.0.1:9102": fmt.Sprintf("127.0.0.1:%d", q2),
		"127.0.0.1:9201": fmt.Sprintf("127.0.0.1:%d", g1),
		"127.0.0.1:9202": fmt.Sprintf("127.0.0.1:%d", g2),
	}
	g := &Gateway{dir: work, data: data, port: port, adminPort: admin,
		Base: fmt.Sprintf("https://localhost:%d", port), Admin: fmt.Sprintf("http://127.0.0.1:%d", admin)}
	g.log = new(syncBuffer)
	g.cmd = exec.Command("bash", script)
	g.cmd.Env = append(append(os.Environ(), "HOME="+work, "XDG_DATA_HOME="+work, "XDG_CONFIG_HOME="+work), d.Env...)
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.done = make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	d.Gateway = g
	t.Cleanup(func() { g.Stop(t) })

	rootPath := filepath.Join(data, "pki", "authorities", "local", "root.crt")
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-g.done:
			t.Fatalf("the demo exited early:\n%s", g.log)
		default:
		}
		if pem, err := os.ReadFile(rootPath); err == nil && g.Client == nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			g.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		}
		if g.Client != nil && d.modelsReady() {
			// The demo writes nothing in the user's home (HOME and
			// XDG_CONFIG_HOME are work here): no autosave of Caddy's.
			if _, err := os.Stat(filepath.Join(work, "caddy", "autosave.json")); err == nil {
				t.Fatal("the demo wrote Caddy's autosave.json into the user's config folder")
			}
			return d
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the demo did not become ready:\n%s", g.log)
	return nil
}

// modelsReady reports whether both of the demo's models are served
// (/readyz says only that the instance is, and the demo marks neither
// model required).
func (d *Demo) modelsReady() bool {
	for _, m := range []string{"qwen", "gemma"} {
		resp, err := d.Client.Get(d.Base + "/readyz/" + m)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return false
		}
	}
	return true
}

// Rewrite replaces the quickstart's addresses in s with the demo's.
func (d *Demo) Rewrite(s string) string {
	for from, to := range d.Ports {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

// pid is the gateway process's id (a child of run.sh).
func (d *Demo) pid(t testing.TB) int {
	t.Helper()
	out, err := exec.Command("pgrep", "-P", fmt.Sprint(d.cmd.Process.Pid), "-f", "llmedge run").Output()
	if err != nil {
		t.Fatalf("no llmedge under run.sh: %v", err)
	}
	var pid int
	if _, err := fmt.Sscan(string(out), &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}
