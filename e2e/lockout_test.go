package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/llmedge/llmedge/internal/redistest"
)

// login posts a password grant to g, from the client address xff when
// set (the gateway trusts X-Forwarded-For from the loopback in these
// tests), and answers the status.
func login(t *testing.T, g *Gateway, user, password, xff string) int {
	t.Helper()
	st, err := loginStatus(g, user, password, xff)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// loginStatus is login for another goroutine than the test's.
func loginStatus(g *Gateway, user, password, xff string) (int, error) {
	req, _ := http.NewRequest("POST", g.Base+"/auth/token",
		strings.NewReader(url.Values{"username": {user}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestLockoutAcrossInstances: two gateways on one Redis. Ten wrong
// passwords for a user, spread over A and B, lock the user on both (the
// right password then gets 429 on B too); forty guesses sent at once over
// both get ten passwords checked, not forty; a hundred failures from the
// addresses of one IPv6 /64, spread over both, lock that whole /64 on
// both, and not the next one. With Redis gone, each instance counts alone
// again (the limits' fallback).
func TestLockoutAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	cfg := GatewayConfig{
		Options: redisOption(srv, "\t\tuser carol "+demoHash),
		Global:  "\tservers {\n\t\ttrusted_proxies static 127.0.0.1/8 ::1\n\t\tclient_ip_headers X-Forwarded-For\n\t}",
		Data:    t.TempDir(),
	}
	a := startGateway(t, cfg)
	b := startGateway(t, cfg)

	for i := range 10 {
		g := a
		if i%2 == 1 {
			g = b
		}
		if st := login(t, g, "alice", "wrong", fmt.Sprintf("192.0.2.%d", i+1)); st != 401 {
			t.Fatalf("wrong password %d: %d", i+1, st)
		}
	}
	for _, g := range []*Gateway{a, b} {
		if st := login(t, g, "alice", "demo", "198.51.100.1"); st != 429 {
			t.Fatalf("the right password after ten wrong ones on two instances: %d, want 429", st)
		}
	}
	if st := login(t, b, "demo", "demo", "198.51.100.1"); st != 200 {
		t.Fatalf("another user: %d", st)
	}

	// Forty guesses at once, over both instances: ten are checked, the
	// others refused before their password is.
	var wg sync.WaitGroup
	statuses := make([]int, 40)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := a
			if i%2 == 1 {
				g = b
			}
			statuses[i], _ = loginStatus(g, "carol", fmt.Sprintf("guess-%d", i), fmt.Sprintf("192.0.2.%d", 100+i))
		}()
	}
	wg.Wait()
	counts := map[int]int{}
	for _, st := range statuses {
		counts[st]++
	}
	if counts[401] != 10 || counts[429] != 30 {
		t.Fatalf("forty guesses at once: %v, want ten checked (401) and thirty refused (429)", counts)
	}

	// One /64: each failure from another of its addresses.
	for i := range 100 {
		g := a
		if i%2 == 1 {
			g = b
		}
		xff := fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1)
		if st := login(t, g, fmt.Sprintf("nobody%d", i), "wrong", xff); st != 401 {
			t.Fatalf("failure %d from %s: %d", i+1, xff, st)
		}
	}
	for _, g := range []*Gateway{a, b} {
		if st := login(t, g, "demo", "demo", "2001:db8:1:2:ffff:ffff:ffff:1"); st != 429 {
			t.Fatalf("another address of the locked /64: %d, want 429", st)
		}
		if st := login(t, g, "demo", "demo", "2001:db8:1:3::1"); st != 200 {
			t.Fatalf("the next /64: %d, want 200", st)
		}
	}

	// Redis down: each instance decides with its own count, as the limits
	// do. A saw five of alice's failures, under the ten that lock.
	srv.Kill()
	login(t, a, "carol", "x", "203.0.113.9") // the failing call marks Redis down
	if st := login(t, a, "alice", "demo", "203.0.113.10"); st != 200 {
		t.Fatalf("alice on A with Redis down: %d, want 200 (A's own count)", st)
	}
}
