package pool

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func replicas(t testing.TB, urls ...string) []*Replica {
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

func TestAcquireExcludeAndCaps(t *testing.T) {
	p := New("m", &rotate{})
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
	p := New("m", &rotate{})
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
	p := New("m", &rotate{})
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
	l, err := p.Acquire(&Request{Model: p.Name()}, exclude)
	return l.Replica, err
}

// Acquire skips a replica that health probing marked unhealthy, and uses it
// again once it is healthy; with none healthy it answers ErrNoReplicas.
func TestAcquireSkipsUnhealthy(t *testing.T) {
	a, _ := NewReplica("http://a:1")
	b, _ := NewReplica("http://b:1")
	p := New("m", &rotate{})
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

// rotate is the tests' policy: it takes the candidates in turn.
type rotate struct{ n atomic.Uint64 }

func (p *rotate) Select(_ *Request, c []*Replica) Choice {
	return Pick(c[int(p.n.Add(1)-1)%len(c)], ReasonRoundRobin)
}
