package e2e

import (
	"crypto/sha256"
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

// A second gateway started on an address another one serves fails at
// start, saying why, instead of silently taking half of the connections
// (Caddy listens with SO_REUSEPORT) with its own certificate and keys.
func TestSecondGatewayOnSameAddressRefused(t *testing.T) {
	sim := startSim(t)
	cfg := GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}}
	g1 := startGateway(t, cfg)
	certOf := func() string {
		resp, err := g1.Client.Get(g1.Base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return fmt.Sprintf("%x", sha256.Sum256(resp.TLS.PeerCertificates[0].Raw))
	}
	want := certOf()

	// The same site port, its own admin port and storage.
	g2 := &Gateway{dir: t.TempDir(), port: g1.port, adminPort: freeport.Must(t)}
	g2.data = filepath.Join(g2.dir, "data")
	conf := filepath.Join(g2.dir, "Caddyfile")
	if err := os.WriteFile(conf, g2.caddyfile(t, cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "llmedge"), "run", "--config", conf, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+g2.dir, "XDG_DATA_HOME="+g2.dir, "XDG_CONFIG_HOME="+g2.dir)
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the second gateway exited cleanly:\n%s", out)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the second gateway is still running on the first one's port:\n%s", lastLines(out.String(), 20))
	}
	if !strings.Contains(out.String(), fmt.Sprintf("another llmedge process already serves :%d", g1.port)) {
		t.Errorf("the refusal does not say why:\n%s", lastLines(out.String(), 10))
	}
	// Every connection still reaches the first gateway.
	for range 20 {
		g1.Client.CloseIdleConnections()
		if got := certOf(); got != want {
			t.Fatal("a connection was served with another certificate")
		}
	}
}

// Oversized header fields get a 431 in the API's JSON shape, naming the
// limit, on every path of the API and through the stage handlers, when
// the HTTP server's own limit is above llmedge's (as the shipped
// Caddyfiles set it).
func TestOversizedHeadersAnsweredInJSON(t *testing.T) {
	sim := startSim(t)
	g := startGateway(t, GatewayConfig{
		Global:  "\tservers {\n\t\tmax_header_size 64KiB\n\t}",
		Options: "\t\tmax_header_size 16KiB",
		Models:  map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Site:    "handle /split {\n\t\tllm_route\n\t}\n\tllm_gateway",
	})
	big := strings.Repeat("a", 20<<10)
	for _, path := range []string{"/tasks/assistant_inference", "/auth/token", "/split", "/readyz"} {
		req, _ := http.NewRequest("POST", g.Base+path, strings.NewReader(`{}`))
		if path == "/readyz" {
			req.Method = "GET"
		}
		req.Header.Set("X-Padding", big)
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e errorBody
		raw := readJSON(t, resp, &e)
		if resp.StatusCode != 431 || !strings.Contains(e.detailText(), "16384 bytes") {
			t.Errorf("%s: %s %s", path, resp.Status, raw)
		}
	}
	// Below the limit, nothing changes.
	tok := g.Token(t, "demo", "demo", "")
	if r := g.infer(t.Context(), nil, tok, withModel("qwen")); r.ok(false) != nil {
		t.Fatal(r.ok(false))
	}
}
