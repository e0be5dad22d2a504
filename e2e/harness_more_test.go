package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/llmedge/llmedge/internal/freeport"
)

// syncBuffer is a bytes.Buffer that the process's output copier and the
// test may use at once.
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

// Signal sends sig to the simulator process (and only to it), e.g.
// SIGSTOP to freeze it as a hung GPU, SIGCONT to resume it.
func (s *Sim) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to llmsim: %v", sig, err)
	}
}

// Log is the gateway's output so far.
func (g *Gateway) Log() string { return g.log.String() }

// Goroutines reads the gateway's goroutine count from the admin
// endpoint's pprof handler.
func (g *Gateway) Goroutines(t testing.TB) int {
	t.Helper()
	resp, err := http.Get(g.Admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total ")))
	if err != nil {
		t.Fatalf("goroutine profile header %q", line)
	}
	return n
}

// Reload rewrites the Caddyfile with edit and loads it through the admin
// API, as `caddy reload` does, forcing a reload even when nothing changed.
func (g *Gateway) Reload(t testing.TB, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(g.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf := edit(string(b))
	if err := os.WriteFile(g.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", g.Admin+"/load", strings.NewReader(conf))
	req.Header.Set("Content-Type", "text/caddyfile")
	req.Header.Set("Cache-Control", "must-revalidate")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %s %s", resp.Status, body)
	}
	// The old server closes its idle HTTP/1.1 connections; a POST sent on
	// one as it closes fails with EOF and is not retried (not idempotent).
	// A client of a reloading gateway retries it; the tests start afresh.
	g.Client.CloseIdleConnections()
}

// result is what one client saw, for tests that run many at once.
type result struct {
	status int
	body   []byte
	header http.Header
	err    error
}

// infer is Infer for goroutines: errors are returned, not fatal.
func (g *Gateway) infer(ctx context.Context, client *http.Client, token string, body any) result {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if client == nil {
		client = g.Client
	}
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, body: b, header: resp.Header, err: err}
}

// ok reports whether the client got a complete answer.
func (r result) ok(stream bool) error {
	switch {
	case r.err != nil:
		return r.err
	case r.status != 200:
		return fmt.Errorf("status %d: %s", r.status, r.body)
	case stream && !strings.Contains(string(r.body), "event: done"):
		return fmt.Errorf("stream without done: %s", lastLines(string(r.body), 4))
	case stream && strings.Contains(string(r.body), "event: error"):
		return fmt.Errorf("stream error: %s", lastLines(string(r.body), 4))
	}
	return nil
}

// A gateway whose port was taken between picking and binding (by a
// process outside the suite) starts again on new ports: the suite does
// not fail for it.
func TestGatewayStartRetriesATakenPort(t *testing.T) {
	sim := startSim(t)
	taken, err := net.Listen("tcp", ":0") // as another program would
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	first := true
	pickPort = func(t freeport.TB) int {
		if first {
			first = false
			return taken.Addr().(*net.TCPAddr).Port
		}
		return freeport.Must(t)
	}
	defer func() { pickPort = freeport.Must }()
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	if g.port == taken.Addr().(*net.TCPAddr).Port {
		t.Fatal("the gateway claims the taken port")
	}
	if r := g.infer(t.Context(), nil, g.Token(t, "demo", "demo", ""), withModel("qwen")); r.ok(false) != nil {
		t.Fatal(r.ok(false))
	}
}
