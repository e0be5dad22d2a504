package pool

import (
	"errors"
	"sync"
	"testing"
)

func replicas(t *testing.T, urls ...string) []*Replica {
	t.Helper()
	var rs []*Replica
	for _, u := range urls {
		r, err := NewReplica(u)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func TestNewReplica(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://127.0.0.1:8000", "http://127.0.0.1:8000", true},
		{"https://gpu-1:443/", "https://gpu-1:443", true},
		{"http://h:1/prefix/", "http://h:1/prefix", true},
		{"127.0.0.1:8000", "", false},
		{"ftp://h", "", false},
		{"http://h?x=1", "", false},
		{"http://", "", false},
	}
	for _, tt := range tests {
		r, err := NewReplica(tt.in)
		if (err == nil) != tt.ok {
			t.Fatalf("%q: err %v", tt.in, err)
		}
		if tt.ok && r.URL != tt.want {
			t.Fatalf("%q: got %q", tt.in, r.URL)
		}
	}
}

func TestPoliciesSpreadAndWeights(t *testing.T) {
	for _, name := range Policies {
		t.Run(name, func(t *testing.T) {
			pol, err := NewPolicy(name)
			if err != nil {
				t.Fatal(err)
			}
			p := New("m", pol)
			rs := replicas(t, "http://a:1", "http://b:1", "http://c:1")
			rs[2].Weight = 2
			p.Set(rs)
			const n = 4000
			// Hold every slot so load-aware policies see real load, then release.
			var held []*Replica
			for i := 0; i < n; i++ {
				r, err := acquire(p, nil)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, r)
				if i%4 == 3 { // keep load moving
					for _, h := range held {
						h.Release()
					}
					held = held[:0]
				}
			}
			for _, h := range held {
				h.Release()
			}
			for _, r := range rs {
				if r.Outstanding() != 0 {
					t.Fatalf("%s outstanding %d after release", r.URL, r.Outstanding())
				}
			}
			a, c := float64(rs[0].Served()), float64(rs[2].Served())
			if a < n/8 || rs[1].Served() < n/8 {
				t.Fatalf("unfair spread: %d %d %d", rs[0].Served(), rs[1].Served(), rs[2].Served())
			}
			if name != PolicyLeastRequests && name != PolicyP2C && (c/a < 1.5 || c/a > 2.5) {
				t.Fatalf("weight 2 replica got %.2fx the traffic", c/a)
			}
		})
	}
	if _, err := NewPolicy("fastest"); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

func TestLoadAwarePoliciesAvoidBusyReplica(t *testing.T) {
	for _, name := range []string{PolicyP2C, PolicyLeastRequests} {
		pol, _ := NewPolicy(name)
		p := New("m", pol)
		rs := replicas(t, "http://a:1", "http://b:1")
		p.Set(rs)
		rs[0].outstanding.Store(100)
		for i := 0; i < 50; i++ {
			r, _ := acquire(p, nil)
			if r != rs[1] {
				t.Fatalf("%s picked the busy replica", name)
			}
			r.Release()
		}
	}
}

func TestAcquireExcludeAndCaps(t *testing.T) {
	p := New("m", &RoundRobin{})
	if _, err := acquire(p, nil); !errors.Is(err, ErrNoReplicas) {
		t.Fatalf("empty pool: %v", err)
	}
	rs := replicas(t, "http://a:1", "http://b:1")
	rs[0].MaxConcurrency = 1
	rs[1].MaxConcurrency = 1
	p.Set(rs)
	r1, err := acquire(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r2, err := acquire(p, []*Replica{}); err != nil || r2 == r1 {
		t.Fatalf("second acquire: %v %v", r2, err)
	}
	if _, err := acquire(p, nil); !errors.Is(err, ErrSaturated) {
		t.Fatalf("full pool: %v", err)
	}
	r1.Release()
	if _, err := acquire(p, []*Replica{r1}); !errors.Is(err, ErrSaturated) {
		t.Fatalf("only the excluded replica has room: %v", err)
	}
	if r, err := acquire(p, nil); err != nil || r != r1 {
		t.Fatalf("freed slot not reused: %v %v", r, err)
	}
	if _, err := acquire(p, rs); !errors.Is(err, ErrNoReplicas) {
		t.Fatalf("all excluded: %v", err)
	}
}

func TestSetKeepsUnchangedReplicas(t *testing.T) {
	p := New("m", P2C{})
	p.Set(replicas(t, "http://a:1", "http://b:1"))
	a, _ := acquire(p, []*Replica{p.Replicas()[1]})
	next := replicas(t, "http://a:1", "http://c:1")
	p.Set(next)
	if p.Replicas()[0] != a || a.Outstanding() != 1 {
		t.Fatal("unchanged replica lost its state")
	}
	changed := replicas(t, "http://a:1")
	changed[0].Weight = 5
	p.Set(changed)
	if p.Replicas()[0] == a {
		t.Fatal("changed settings should give a new replica")
	}
}

func TestConcurrentAcquireRespectsCap(t *testing.T) {
	p := New("m", P2C{})
	rs := replicas(t, "http://a:1", "http://b:1")
	for _, r := range rs {
		r.MaxConcurrency = 3
	}
	p.Set(rs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var peak int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				r, err := acquire(p, nil)
				if err != nil {
					continue
				}
				mu.Lock()
				if o := r.Outstanding(); o > peak {
					peak = o
				}
				mu.Unlock()
				r.Release()
			}
		}()
	}
	wg.Wait()
	if peak > 3 {
		t.Fatalf("cap exceeded: %d", peak)
	}
}

// acquire takes a slot without its breaker outcome mattering: the tests
// using it free slots with Replica.Release and never fail a request.
func acquire(p *Pool, exclude []*Replica) (*Replica, error) {
	l, err := p.Acquire(exclude)
	return l.Replica, err
}

// Acquire skips a replica that health probing marked unhealthy, and uses it
// again once it is healthy; with none healthy it answers ErrNoReplicas.
func TestAcquireSkipsUnhealthy(t *testing.T) {
	a, _ := NewReplica("http://a:1")
	b, _ := NewReplica("http://b:1")
	p := New("m", &RoundRobin{})
	p.Set([]*Replica{a, b})
	b.SetHealthy(false)
	for range 4 {
		r, err := acquire(p, nil)
		if err != nil || r != a {
			t.Fatalf("Acquire = %v, %v; want a", r, err)
		}
		r.Release()
	}
	a.SetHealthy(false)
	if _, err := acquire(p, nil); err != ErrNoReplicas {
		t.Fatalf("all unhealthy: err = %v, want ErrNoReplicas", err)
	}
	b.SetHealthy(true)
	if r, err := acquire(p, nil); err != nil || r != b {
		t.Fatalf("Acquire = %v, %v; want b", r, err)
	}
	// The health state survives a Set with the same configuration.
	b2, _ := NewReplica("http://b:1")
	p.Set([]*Replica{a, b2})
	if p.Replicas()[0].Healthy() {
		t.Error("a became healthy again through Set")
	}
}
