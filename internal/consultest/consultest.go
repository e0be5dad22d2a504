// Package consultest runs a real Consul agent (`consul agent -dev`) on free
// loopback ports for tests (from internal/freeport; the agent is started
// again on new ports when one was taken meanwhile). The binary is <repo>/bin/consul (built by
// `make consul` from the pinned tools module) or $LLMEDGE_CONSUL_BIN.
// Under `go test -short` a missing binary skips the test; otherwise it
// fails it, so CI cannot silently lose the Consul tests.
package consultest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/internal/freeport"
)

// BinaryEnv names the environment variable that overrides the binary path.
const BinaryEnv = "LLMEDGE_CONSUL_BIN"

// Binary returns the consul binary's path, skipping (with -short) or
// failing the test when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(BinaryEnv)
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("consultest: %v", err)
		}
		path = filepath.Join(root, "bin", "consul")
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("consul binary %s is missing: run `make consul` (builds Consul v1.20.6 from tools/consul) or set %s", path, BinaryEnv)
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

// Agent is a running dev agent.
type Agent struct {
	// Addr is the HTTP API address, 127.0.0.1:PORT.
	Addr string
	// Node is the agent's node name.
	Node string

	bin  string
	args []string

	clientOnce sync.Once
	client     *api.Client
	transport  *http.Transport

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

// Start runs a dev agent on free ports and stops it when the test ends.
func Start(t testing.TB) *Agent {
	t.Helper()
	bin := Binary(t)
	var lastErr error
	// The ports are free when picked, but the agent binds them later: when
	// another process took one in between, start again on new ones.
	for try := 0; try < 5; try++ {
		ports, err := freeport.GetN(4)
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{
			Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
			Node: fmt.Sprintf("llmedge-test-%d", ports[0]),
			bin:  bin,
		}
		a.args = []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
			"-node", a.Node, "-log-level", "info",
			"-http-port", fmt.Sprint(ports[0]), "-server-port", fmt.Sprint(ports[1]),
			"-serf-lan-port", fmt.Sprint(ports[2]), "-serf-wan-port", fmt.Sprint(ports[3]),
			"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1",
			"-hcl", "disable_update_check = true"}
		if lastErr = a.start(); lastErr == nil {
			t.Cleanup(func() {
				a.Kill()
				if t.Failed() {
					t.Logf("consul agent log (last lines):\n%s", lastLines(a.log.String(), 60))
				}
			})
			return a
		}
		a.Kill()
		if !freeport.AddrInUse(a.log.String()) && try >= 2 {
			break // not a port taken: trying more ports will not help
		}
		t.Logf("consul agent did not start (try %d), again on new ports: %v", try+1, firstLine(lastErr))
	}
	t.Fatalf("consul agent did not start: %v", lastErr)
	return nil
}

func (a *Agent) start() error {
	a.mu.Lock()
	a.log = &lockedBuffer{}
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = a.log, a.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		a.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	a.cmd, a.done = cmd, done
	a.mu.Unlock()
	return a.waitReady(60 * time.Second)
}

// waitReady waits for a leader and for the agent's own node in the catalog
// (then registrations sync to the catalog at once).
func (a *Agent) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-a.done:
			return fmt.Errorf("consul exited early:\n%s", lastLines(a.log.String(), 20))
		default:
		}
		if getJSON(client, "http://"+a.Addr+"/v1/status/leader") != "" &&
			getJSON(client, "http://"+a.Addr+"/v1/catalog/node/"+a.Node) != "" {
			return a.waitSyncing(client, deadline)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("consul not ready after %s:\n%s", timeout, lastLines(a.log.String(), 20))
}

// waitSyncing waits until the agent passes local changes to the catalog at
// once. When the "new leader" event reaches a starting agent, its
// anti-entropy syncer schedules a full sync after a random pause of up to
// serverUpInterval (3 s), and holds every change (a check going critical,
// a registration) until then; tests that time discovery must not start in
// that window. So: wait for that event in the log, let 3 s pass, then wait
// for two probe registrations in a row that reach the health API within
// 200 ms.
func (a *Agent) waitSyncing(client *http.Client, deadline time.Time) error {
	const serverUpInterval = 3 * time.Second // consul/agent/ae
	for leaderSeen := time.Now().Add(10 * time.Second); !strings.Contains(a.log.String(), "New leader elected"); {
		if time.Now().After(leaderSeen) {
			break // not logged as expected: the probes below still guard
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(serverUpInterval + 100*time.Millisecond)
	fast := 0
	for i := 0; fast < 2; i++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("consul agent does not sync registrations promptly")
		}
		id := fmt.Sprintf("consultest-probe-%d", i)
		body := fmt.Sprintf(`{"ID":%q,"Name":"consultest-probe","Address":"127.0.0.1","Port":1}`, id)
		start := time.Now()
		if err := put(client, "http://"+a.Addr+"/v1/agent/service/register", body); err != nil {
			return err
		}
		for !strings.Contains(getBody(client, "http://"+a.Addr+"/v1/health/service/consultest-probe?passing=1"), id) {
			if time.Now().After(deadline) {
				return fmt.Errorf("probe registration never reached the catalog")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if time.Since(start) < 200*time.Millisecond {
			fast++
		} else {
			fast = 0
		}
		if err := put(client, "http://"+a.Addr+"/v1/agent/service/deregister/"+id, ""); err != nil {
			return err
		}
	}
	return nil
}

func put(c *http.Client, url, body string) error {
	req, _ := http.NewRequest("PUT", url, strings.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("PUT %s: %s", url, resp.Status)
	}
	return nil
}

func getBody(c *http.Client, url string) string {
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.String()
}

// getJSON returns the body of a 200 answer that is neither empty, "" nor null.
func getJSON(c *http.Client, url string) string {
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v any
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil || v == nil || v == "" {
		return ""
	}
	return "ok"
}

// Kill ends the agent with SIGKILL, as a crash, and waits for it. A dev
// agent keeps nothing: after Restart it knows no services.
func (a *Agent) Kill() {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Restart starts the agent again on the same ports after Kill.
func (a *Agent) Restart(t testing.TB) {
	t.Helper()
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = a.start(); err == nil {
			return
		}
		a.Kill()
		if time.Now().After(deadline) {
			t.Fatalf("consul agent did not restart: %v", err)
		}
		time.Sleep(500 * time.Millisecond) // ports may linger a moment
	}
}

// Config is the discovery configuration that reaches this agent.
func (a *Agent) Config() discovery.ConsulConfig {
	return discovery.ConsulConfig{Address: a.Addr, Scheme: "http"}
}

// Client is an API client of this agent, shared by the helpers.
func (a *Agent) Client(t testing.TB) *api.Client {
	t.Helper()
	a.clientOnce.Do(func() {
		var err error
		a.client, a.transport, err = discovery.NewClient(a.Config())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.transport.CloseIdleConnections)
	})
	return a.client
}

// CloseIdleConnections closes the helpers' idle connections to the agent
// (for tests that count goroutines).
func (a *Agent) CloseIdleConnections() {
	if a.transport != nil {
		a.transport.CloseIdleConnections()
	}
}

// Register registers a service instance (with a 10 s deadline).
func (a *Agent) Register(t testing.TB, reg *api.AgentServiceRegistration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(ctx)
	if err := a.Client(t).Agent().ServiceRegisterOpts(reg, opts); err != nil {
		t.Fatalf("register %s: %v", reg.ID, err)
	}
}

// Deregister removes a service instance (with a 10 s deadline).
func (a *Agent) Deregister(t testing.TB, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Client(t).Agent().ServiceDeregisterOpts(id, (&api.QueryOptions{}).WithContext(ctx)); err != nil {
		t.Fatalf("deregister %s: %v", id, err)
	}
}

// Instance is a registration of service at 127.0.0.1:port without a check
// (so passing at once), with meta.
func Instance(service, id string, port int, meta map[string]string) *api.AgentServiceRegistration {
	return &api.AgentServiceRegistration{ID: id, Name: service, Address: "127.0.0.1", Port: port, Meta: meta}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
