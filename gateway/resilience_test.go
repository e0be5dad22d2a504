package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// checkBalanced fails unless every Allow of every replica's breaker got
// its done, and every slot was given back.
func checkBalanced(t *testing.T, g *Gateway) {
	t.Helper()
	for _, r := range g.Models["qwen"].Pool.Replicas() {
		req, succ, fail, excl := r.BreakerCounts()
		if r.BreakerState() == pool.StateClosed && req != succ+fail+excl {
			t.Errorf("%s: %d allowed but %d outcomes (%d ok, %d failed, %d excluded)", r.URL, req, succ+fail+excl, succ, fail, excl)
		}
		if r.Outstanding() != 0 {
			t.Errorf("%s: %d slots still held", r.URL, r.Outstanding())
		}
	}
}

func TestBreakerHearsEachAttemptOnce(t *testing.T) {
	lots := pool.Options{Breaker: pool.BreakerSettings{ConsecutiveFailures: 1000}}
	tests := []struct {
		name                 string
		script               script
		stream, cancel       bool
		status               int
		succ, fail, excluded uint32
	}{
		{"success", script{deltas: []string{"a", "b"}}, false, false, 200, 1, 0, 0},
		{"stream success", script{deltas: []string{"a", "b"}}, true, false, 200, 1, 0, 0},
		{"5xx", script{err: errServer}, false, false, 502, 0, 1, 0},
		{"broken stream", script{deltas: []string{"a"}, err: errServer}, true, false, 200, 0, 1, 0},
		{"first token timeout", script{deltas: []string{"a"}, delay: 2 * time.Second}, true, false, 504, 0, 1, 0},
		{"replica 4xx", script{err: errBadReq}, false, false, 422, 1, 0, 0},
		{"replica overloaded", script{err: errOver}, false, false, 429, 0, 0, 1},
		{"client cancels stream", script{deltas: []string{"a", "b", "c"}, delay: 100 * time.Millisecond}, true, true, 200, 0, 0, 1},
		{"client cancels request", script{deltas: []string{"a"}, delay: time.Second}, false, true, 200, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newTestGatewayOpts(t, lots, map[string]script{"http://a:1": tt.script}, "http://a:1")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				time.AfterFunc(150*time.Millisecond, cancel)
			}
			req := request(tt.stream)
			w := serveCtx(g, ctx, req)
			if !tt.cancel && w.Code != tt.status {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			checkBalanced(t, g)
			_, succ, fail, excl := g.Models["qwen"].Pool.Replicas()[0].BreakerCounts()
			if succ != tt.succ || fail != tt.fail || excl != tt.excluded {
				t.Fatalf("breaker heard %d ok, %d failed, %d excluded; want %d %d %d", succ, fail, excl, tt.succ, tt.fail, tt.excluded)
			}
		})
	}
}

// TestHalfOpenProbeCancelledByClient would hang the breaker half-open if a
// cancelled stream's attempt never reported its outcome.
func TestHalfOpenProbeCancelledByClient(t *testing.T) {
	g, fb := newTestGatewayOpts(t, pool.Options{Breaker: pool.BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 50 * time.Millisecond}},
		map[string]script{"http://a:1": {err: errServer}}, "http://a:1")
	if w := serve(g, request(false)); w.Code != 502 {
		t.Fatalf("first failure: %d", w.Code)
	}
	rep := g.Models["qwen"].Pool.Replicas()[0]
	if rep.BreakerState() != pool.StateOpen {
		t.Fatal("breaker did not open")
	}
	// Open: fast 503 naming the model, without calling the replica.
	w := serve(g, request(false))
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "'qwen'") || len(fb.calls) != 1 {
		t.Fatalf("open breaker: %d %q %s calls %d", w.Code, w.Header().Get("Retry-After"), w.Body, len(fb.calls))
	}
	waitFor(t, func() bool { return rep.BreakerState() == pool.StateHalfOpen })

	fb.mu.Lock()
	fb.scripts["http://a:1"] = script{deltas: []string{"a", "b", "c"}, delay: 100 * time.Millisecond}
	fb.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	serveCtx(g, ctx, request(true)) // the probe; its client leaves mid-stream
	if rep.BreakerState() != pool.StateHalfOpen {
		t.Fatalf("cancelled probe moved the breaker to %v", rep.BreakerState())
	}
	// The probe slot is free again: the next request is the new probe.
	fb.mu.Lock()
	fb.scripts["http://a:1"] = script{deltas: []string{"ok"}}
	fb.mu.Unlock()
	if w := serve(g, request(true)); w.Code != 200 || !strings.Contains(w.Body.String(), "event: done") {
		t.Fatalf("probe after a cancelled probe: %d %s", w.Code, w.Body)
	}
	if rep.BreakerState() != pool.StateClosed {
		t.Fatalf("successful probe left the breaker %v", rep.BreakerState())
	}
	checkBalanced(t, g)
}

func TestFailingReplicaHiddenByBreaker(t *testing.T) {
	g, fb := newTestGatewayOpts(t, pool.Options{Breaker: pool.BreakerSettings{ConsecutiveFailures: 3, OpenTimeout: time.Hour}},
		map[string]script{"http://a:1": {err: errServer}, "http://b:1": {deltas: []string{"ok"}}}, "http://a:1", "http://b:1")
	for i := 0; i < 30; i++ {
		if w := serve(g, request(i%2 == 0)); w.Code != 200 || strings.Contains(w.Body.String(), "event: error") {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
	}
	a := 0
	for _, c := range fb.calls {
		if c == "http://a:1" {
			a++
		}
	}
	if a != 3 {
		t.Fatalf("failing replica called %d times, want 3 (the threshold)", a)
	}
	checkBalanced(t, g)
}

func TestTryDurationStopsRetries(t *testing.T) {
	slowFail := script{delay: 200 * time.Millisecond, err: errServer}
	g, fb := newTestGateway(t, map[string]script{"http://a:1": slowFail, "http://b:1": slowFail, "http://c:1": slowFail},
		"http://a:1", "http://b:1", "http://c:1")
	g.Models["qwen"].TryDuration = 100 * time.Millisecond
	if w := serve(g, request(false)); w.Code != 502 || len(fb.calls) != 1 {
		t.Fatalf("%d, %d calls", w.Code, len(fb.calls))
	}
	g.Models["qwen"].TryDuration = 0
	g.Models["qwen"].MaxAttempts = 2
	fb.calls = nil
	if w := serve(g, request(false)); w.Code != 502 || len(fb.calls) != 2 {
		t.Fatalf("%d, %d calls", w.Code, len(fb.calls))
	}
}

func TestAllUnreachableIs503(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{"http://a:1": {err: errConnect}, "http://b:1": {err: errConnect}}, "http://a:1", "http://b:1")
	w := serve(g, request(false))
	if w.Code != 503 || w.Header().Get("Retry-After") == "" || len(fb.calls) != 2 {
		t.Fatalf("%d %s, %d calls", w.Code, w.Body, len(fb.calls))
	}
}

func TestQueueWaitsForSlot(t *testing.T) {
	g, _ := newTestGatewayOpts(t, pool.Options{QueueLength: 4, QueueTimeout: 30 * time.Second},
		map[string]script{"http://a:1": {deltas: []string{"ok"}}}, "http://a:1")
	p := g.Models["qwen"].Pool
	p.Replicas()[0].MaxConcurrency = 1
	held, err := p.Acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- serve(g, request(false)) }()
	waitFor(t, func() bool { return p.Waiting() == 1 })
	time.Sleep(20 * time.Millisecond) // measurable queue time
	held.Release(pool.Success)
	w := <-done
	if w.Code != 200 || !strings.Contains(w.Header().Get("Server-Timing"), "queue;dur=") ||
		strings.Contains(w.Header().Get("Server-Timing"), "queue;dur=0.00,") {
		t.Fatalf("%d %q %s", w.Code, w.Header().Get("Server-Timing"), w.Body)
	}

	g2, _ := newTestGatewayOpts(t, pool.Options{QueueLength: 4, QueueTimeout: 100 * time.Millisecond},
		map[string]script{"http://a:1": {deltas: []string{"ok"}}}, "http://a:1")
	p2 := g2.Models["qwen"].Pool
	p2.Replicas()[0].MaxConcurrency = 1
	held2, _ := p2.Acquire(nil, nil)
	defer held2.Release(pool.Success)
	start := time.Now()
	w = serve(g2, request(true))
	if w.Code != 429 || w.Header().Get("Retry-After") == "" || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("queue timeout: %d after %v: %s", w.Code, time.Since(start), w.Body)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "dial tcp 10.0.0.1:80: i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestTimeoutsAreClear checks each timeout's answer: 504 before the
// stream starts, event: error after.
func TestTimeoutsAreClear(t *testing.T) {
	dialTimeout := &protocols.Error{Kind: protocols.KindConnect, Message: "cannot connect to the replica", Err: timeoutErr{}}
	t.Run("dial", func(t *testing.T) {
		g, fb := newTestGateway(t, map[string]script{"http://a:1": {err: dialTimeout}, "http://b:1": {err: dialTimeout}}, "http://a:1", "http://b:1")
		for _, stream := range []bool{false, true} {
			w := serve(g, request(stream))
			if w.Code != 504 || !strings.Contains(w.Body.String(), "could not be reached in time") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		}
		if len(fb.calls) != 4 {
			t.Fatalf("dial timeouts not retried: %d calls", len(fb.calls))
		}
	})
	t.Run("total before the stream", func(t *testing.T) {
		g, _ := newTestGateway(t, map[string]script{"http://a:1": {deltas: []string{"x"}, delay: 200 * time.Millisecond}}, "http://a:1")
		g.Models["qwen"].Timeouts = Timeouts{FirstToken: time.Minute, Idle: time.Minute, Total: 100 * time.Millisecond}
		for _, stream := range []bool{false, true} {
			if w := serve(g, request(stream)); w.Code != 504 || !strings.Contains(w.Body.String(), "in time") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
	t.Run("total after the stream started", func(t *testing.T) {
		g, _ := newTestGateway(t, map[string]script{"http://a:1": {deltas: []string{"a", "b", "c", "d"}, delay: 60 * time.Millisecond}}, "http://a:1")
		g.Models["qwen"].Timeouts = Timeouts{FirstToken: time.Minute, Idle: time.Minute, Total: 150 * time.Millisecond}
		w := serve(g, request(true))
		body := w.Body.String()
		if w.Code != 200 || !strings.Contains(body, `data: {"content":"a"}`) || !strings.Contains(body, "event: error") || strings.Contains(body, "event: done") {
			t.Fatalf("%d %q", w.Code, body)
		}
		checkBalanced(t, g)
	})
}
