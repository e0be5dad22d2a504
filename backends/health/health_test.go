package health

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/routing"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func replica(t *testing.T, url string) *pool.Replica {
	r, err := pool.NewReplica(url)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A loading replica (503, or refusing connections) is marked unhealthy and
// skipped by the pool; it is used again once its health path answers 200.
func TestProberMarksLoadingReplicas(t *testing.T) {
	var loading atomic.Bool
	loading.Store(true)
	var paths atomic.Value
	llama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Store(r.URL.Path)
		if loading.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer llama.Close()
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()

	a, b := replica(t, llama.URL), replica(t, refusedURL)
	p := pool.New("m", &routing.RoundRobin{})
	p.Set([]*pool.Replica{a, b})
	pr := &Prober{Targets: []Target{{Pool: p, Path: func(*pool.Replica) string { return "/health" }, Interval: 20 * time.Millisecond, Timeout: time.Second}}}
	pr.Start()
	defer pr.Stop()

	waitFor(t, "both unhealthy", func() bool { return !a.Healthy() && !b.Healthy() })
	if _, err := p.Acquire(nil, nil); err != pool.ErrNoReplicas {
		t.Fatalf("Acquire with every replica loading: %v, want ErrNoReplicas", err)
	}
	if got := paths.Load(); got != "/health" {
		t.Errorf("probed path %v, want /health", got)
	}
	loading.Store(false)
	waitFor(t, "llama.cpp healthy", a.Healthy)
	if l, err := p.Acquire(nil, nil); err != nil || l.Replica != a {
		t.Fatalf("Acquire = %v, %v; want the ready replica", l.Replica, err)
	} else {
		l.Release(pool.Success)
	}
	if b.Healthy() {
		t.Error("a replica refusing connections became healthy")
	}
}

// Stop returns only once probing has ended: no goroutine survives it, and
// replica states no longer change.
func TestProberStopLeavesNothingBehind(t *testing.T) {
	var ok atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok.Load() {
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	before := runtime.NumGoroutine()
	r := replica(t, srv.URL)
	p := pool.New("m", &routing.RoundRobin{})
	p.Set([]*pool.Replica{r})
	for range 3 { // as across config reloads
		pr := &Prober{Client: srv.Client(), Targets: []Target{{Pool: p, Interval: 5 * time.Millisecond}}}
		pr.Start()
		waitFor(t, "unhealthy", func() bool { return !r.Healthy() })
		pr.Stop()
	}
	ok.Store(true)
	time.Sleep(50 * time.Millisecond)
	if r.Healthy() {
		t.Error("a stopped prober still changed the replica")
	}
	srv.Client().CloseIdleConnections()
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before+1 })
}

// What a probe answer means: 2xx and "no such endpoint" are usable; 5xx,
// other 4xx, timeouts and refused connections are not.
func TestProbeOutcomes(t *testing.T) {
	slow := make(chan struct{})
	defer close(slow)
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want bool
	}{
		{"200", func(w http.ResponseWriter, r *http.Request) {}, true},
		{"204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }, true},
		{"404 no health endpoint", http.NotFound, true},
		{"405", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(405) }, true},
		{"503 loading", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, false},
		{"500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, false},
		{"401", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }, false},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-slow:
			case <-r.Context().Done():
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			if got := (&Prober{}).probe(t.Context(), srv.URL+"/health", 200*time.Millisecond); got != tc.want {
				t.Errorf("probe = %v, want %v", got, tc.want)
			}
		})
	}
}

// A replica whose breaker opened is probed between full rounds; seen down
// (its process gone) and then passing, it is readmitted: its breaker
// closes at once, long before its open timeout. A replica whose probe
// never failed (it fails requests, not its health check) stays out.
func TestProberReadmitsRestartedReplica(t *testing.T) {
	var down atomic.Bool
	restarted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(503)
		}
	}))
	defer restarted.Close()
	var probes atomic.Int32
	poisoned := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { probes.Add(1) }))
	defer poisoned.Close()

	a, b := replica(t, restarted.URL), replica(t, poisoned.URL)
	p := pool.NewWithOptions("m", &routing.RoundRobin{}, pool.Options{Breaker: pool.BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}})
	p.Set([]*pool.Replica{a, b})
	defer p.Close()
	for _, r := range []*pool.Replica{a, b} {
		l, err := p.Acquire(nil, []*pool.Replica{other(a, b, r)})
		if err != nil {
			t.Fatal(err)
		}
		l.Release(pool.Failure)
		if r.BreakerState() != pool.StateOpen {
			t.Fatalf("%s: breaker %v, want open", r.URL, r.BreakerState())
		}
	}
	down.Store(true)
	// A full round only every hour: what follows is the recheck's doing.
	pr := &Prober{Targets: []Target{{Pool: p, Interval: time.Hour, Recheck: 10 * time.Millisecond, Timeout: time.Second}}}
	pr.Start()
	defer pr.Stop()
	waitFor(t, "the restarted replica seen down", func() bool { return !a.Healthy() })
	down.Store(false)
	waitFor(t, "the restarted replica readmitted", func() bool { return a.BreakerState() == pool.StateClosed })
	if !a.Healthy() {
		t.Error("readmitted but unhealthy")
	}
	waitFor(t, "the poisoned replica rechecked", func() bool { return probes.Load() >= 5 })
	if b.BreakerState() != pool.StateOpen {
		t.Errorf("a replica whose probe never failed was readmitted: breaker %v", b.BreakerState())
	}
}

// A replica restarted faster than the probes could see it down is
// readmitted too, when a request found it unreachable (connection
// refused): a probe that passes after that is a new process.
func TestProberReadmitsReplicaFoundUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	a := replica(t, srv.URL)
	p := pool.NewWithOptions("m", &routing.RoundRobin{}, pool.Options{Breaker: pool.BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}})
	p.Set([]*pool.Replica{a})
	defer p.Close()
	l, err := p.Acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(pool.Unreachable)
	if a.BreakerState() != pool.StateOpen {
		t.Fatal("breaker did not open")
	}
	pr := &Prober{Targets: []Target{{Pool: p, Interval: time.Hour, Recheck: 10 * time.Millisecond, Timeout: time.Second}}}
	pr.Start()
	defer pr.Stop()
	waitFor(t, "the replica readmitted", func() bool { return a.BreakerState() == pool.StateClosed })
}

// A target whose source checks its replicas' health is probed only
// where a replica is out of rotation: one whose breaker is closed is
// never probed, one whose breaker opened is, and is readmitted.
func TestProberOutOnly(t *testing.T) {
	var probes [2]atomic.Int32
	var down atomic.Bool
	servers := make([]*httptest.Server, 2)
	for i := range servers {
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			probes[i].Add(1)
			if i == 1 && down.Load() {
				w.WriteHeader(503)
			}
		}))
		defer servers[i].Close()
	}
	in, out := replica(t, servers[0].URL), replica(t, servers[1].URL)
	p := pool.NewWithOptions("m", &routing.RoundRobin{}, pool.Options{Breaker: pool.BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}})
	p.Set([]*pool.Replica{in, out})
	defer p.Close()
	l, err := p.Acquire(nil, []*pool.Replica{in})
	if err != nil {
		t.Fatal(err)
	}
	l.Release(pool.Failure)
	down.Store(true)
	pr := &Prober{Targets: []Target{{Pool: p, Recheck: 10 * time.Millisecond, Timeout: time.Second, OutOnly: true}}}
	pr.Start()
	defer pr.Stop()
	waitFor(t, "the replica out seen down", func() bool { return !out.Healthy() })
	down.Store(false)
	waitFor(t, "the replica out readmitted", func() bool { return out.BreakerState() == pool.StateClosed })
	if n := probes[0].Load(); n != 0 {
		t.Errorf("a replica in rotation was probed %d times", n)
	}
}

func other(a, b, r *pool.Replica) *pool.Replica {
	if r == a {
		return b
	}
	return a
}
