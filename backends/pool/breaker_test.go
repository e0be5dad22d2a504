package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/keep"
)

var poolSeq atomic.Int64

// newTestPool returns a pool with a name no other test uses and breakers
// of its own; it is closed at the end.
func newTestPool(t testing.TB, o Options, urls ...string) (*Pool, []*Replica) {
	t.Helper()
	p := NewWithOptions(t.Name()+"#"+time.Now().String()+string(rune('a'+poolSeq.Add(1)%26)), &rotate{}, o)
	rs := replicas(t, urls...)
	p.Set(rs)
	t.Cleanup(p.Close)
	return p, rs
}

// runOn acquires the given replica (excluding every other) and releases it with o.
func runOn(t *testing.T, p *Pool, r *Replica, o Outcome) {
	t.Helper()
	var others []*Replica
	for _, x := range p.Replicas() {
		if x != r {
			others = append(others, x)
		}
	}
	l, err := p.Acquire(nil, others)
	if err != nil || l.Replica != r {
		t.Fatalf("acquire %s: %v %v", r.URL, l.Replica, err)
	}
	l.Release(o)
}

func waitState(t *testing.T, r *Replica, want BreakerState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.BreakerState() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: breaker %v, want %v", r.URL, r.BreakerState(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBreakerOpensOnConsecutiveFailuresAndLeavesSelection(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{ConsecutiveFailures: 3, OpenTimeout: time.Hour}},
		"http://a:1", "http://b:1")
	a, b := rs[0], rs[1]
	runOn(t, p, a, Failure)
	runOn(t, p, a, Failure)
	runOn(t, p, a, Success) // resets the run
	runOn(t, p, a, Failure)
	runOn(t, p, a, Failure)
	if a.BreakerState() != StateClosed {
		t.Fatal("tripped before 3 consecutive failures")
	}
	runOn(t, p, a, Failure)
	if a.BreakerState() != StateOpen {
		t.Fatalf("breaker %v after 3 consecutive failures", a.BreakerState())
	}
	for i := 0; i < 50; i++ {
		l, err := p.Acquire(nil, nil)
		if err != nil || l.Replica != b {
			t.Fatalf("open replica selected: %v %v", l.Replica, err)
		}
		l.Release(Success)
	}
	if _, err := p.Acquire(nil, []*Replica{b}); !errors.Is(err, ErrBreakersOpen) || !errors.Is(err, ErrNoReplicas) {
		t.Fatalf("only an open replica left: %v", err)
	}
}

func TestBreakerExcludedOutcomesDoNotCount(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{ConsecutiveFailures: 2, OpenTimeout: time.Hour}}, "http://a:1")
	for i := 0; i < 20; i++ {
		runOn(t, p, rs[0], Excluded)
	}
	runOn(t, p, rs[0], Failure)
	if rs[0].BreakerState() != StateClosed {
		t.Fatal("excluded outcomes counted as failures")
	}
	req, succ, fail, excl := rs[0].BreakerCounts()
	if req != 21 || succ != 0 || fail != 1 || excl != 20 {
		t.Fatalf("counts %d %d %d %d", req, succ, fail, excl)
	}
}

func TestBreakerFailureRatio(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{FailureRatio: 0.5, MinRequests: 6, OpenTimeout: time.Hour}}, "http://a:1")
	a := rs[0]
	for _, o := range []Outcome{Failure, Success, Failure, Success, Success} {
		runOn(t, p, a, o)
	}
	if a.BreakerState() != StateClosed {
		t.Fatal("tripped before min_requests")
	}
	runOn(t, p, a, Failure) // 3 of 6
	if a.BreakerState() != StateOpen {
		t.Fatalf("breaker %v at a failure ratio of 0.5", a.BreakerState())
	}
}

func TestBreakerHalfOpenProbesThenCloses(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 50 * time.Millisecond}},
		"http://a:1", "http://b:1")
	a, b := rs[0], rs[1]
	runOn(t, p, a, Failure)
	if a.BreakerState() != StateOpen {
		t.Fatal("not open")
	}
	waitState(t, a, StateHalfOpen)

	probe, err := p.Acquire(nil, []*Replica{b})
	if err != nil || probe.Replica != a {
		t.Fatalf("half-open replica refused its probe: %v", err)
	}
	// One probe at a time: a second request goes elsewhere, or nowhere.
	if _, err := p.Acquire(nil, []*Replica{b}); !errors.Is(err, ErrBreakersOpen) {
		t.Fatalf("second probe let through: %v", err)
	}
	for i := 0; i < 20; i++ {
		l, err := p.Acquire(nil, nil)
		if err != nil || l.Replica != b {
			t.Fatalf("request went to the probing replica: %v %v", l.Replica, err)
		}
		l.Release(Success)
	}
	// A cancelled probe says nothing; it frees the probe slot.
	probe.Release(Excluded)
	if a.BreakerState() != StateHalfOpen {
		t.Fatalf("excluded probe moved the breaker to %v", a.BreakerState())
	}
	probe.Release(Failure) // a second Release is a no-op
	if a.BreakerState() != StateHalfOpen {
		t.Fatal("double release reached the breaker")
	}
	runOn(t, p, a, Success)
	if a.BreakerState() != StateClosed {
		t.Fatalf("successful probe left the breaker %v", a.BreakerState())
	}

	// A failed probe opens it again.
	runOn(t, p, a, Failure)
	waitState(t, a, StateHalfOpen)
	runOn(t, p, a, Failure)
	if a.BreakerState() != StateOpen {
		t.Fatalf("failed probe left the breaker %v", a.BreakerState())
	}
}

func TestBreakerSurvivesUpdatesAndReloads(t *testing.T) {
	name := t.Name()
	kept := keep.New() // what outlives a reload, as the app's
	settings := Options{Breaker: BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}, Kept: kept}
	p1 := NewWithOptions(name, &rotate{}, settings)
	p1.Set(replicas(t, "http://a:1", "http://b:1"))
	a := p1.Replicas()[0]
	runOn(t, p1, a, Failure)

	// A discovery update that changes a's weight keeps its breaker.
	changed := replicas(t, "http://a:1", "http://b:1")
	changed[0].Weight = 3
	p1.Set(changed)
	if p1.Replicas()[0] == a || p1.Replicas()[0].BreakerState() != StateOpen {
		t.Fatal("changed replica lost its breaker")
	}

	// A reload: the new pool is provisioned before the old one is closed.
	p2 := NewWithOptions(name, &rotate{}, settings)
	p2.Set(replicas(t, "http://a:1", "http://b:1"))
	p1.Close()
	if p2.Replicas()[0].BreakerState() != StateOpen {
		t.Fatal("reload reset the open breaker")
	}
	// Other settings, other breaker.
	p3 := NewWithOptions(name, &rotate{}, Options{Breaker: BreakerSettings{ConsecutiveFailures: 9}, Kept: kept})
	p3.Set(replicas(t, "http://a:1"))
	if p3.Replicas()[0].BreakerState() != StateClosed {
		t.Fatal("breaker shared across different settings")
	}
	p3.Close()
	// A replica leaving the set lets its breaker go.
	p2.Set(replicas(t, "http://b:1"))
	if got := len(kept.Keys()); got != 1 {
		t.Fatalf("the store holds %d breakers, want 1", got)
	}
	p2.Close()
	if got := len(kept.Keys()); got != 0 {
		t.Fatalf("the store holds %d breakers after close, want none", got)
	}
}

func TestBreakersDisabled(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{Disabled: true}}, "http://a:1")
	for i := 0; i < 20; i++ {
		runOn(t, p, rs[0], Failure)
	}
	if rs[0].BreakerState() != StateClosed {
		t.Fatal("disabled breaker opened")
	}
}

func TestWaitQueue(t *testing.T) {
	p, rs := newTestPool(t, Options{QueueLength: 1, QueueTimeout: time.Minute}, "http://a:1")
	rs[0].MaxConcurrency = 1 // before any acquire; the test owns the replica
	held, err := p.Acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := p.AcquireWait(context.Background(), nil, nil)
		if err == nil && l.Replica != rs[0] {
			err = errors.New("wrong replica")
		}
		l.Release(Success)
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for p.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("waiter never queued")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := p.AcquireWait(context.Background(), nil, nil); !errors.Is(err, ErrQueueFull) || !errors.Is(err, ErrSaturated) {
		t.Fatalf("over the queue length: %v", err)
	}
	select {
	case err := <-got:
		t.Fatalf("waiter returned while the slot was held: %v", err)
	default:
	}
	held.Release(Success)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by a released slot")
	}
	if rs[0].Outstanding() != 0 || p.Waiting() != 0 {
		t.Fatalf("outstanding %d, waiting %d", rs[0].Outstanding(), p.Waiting())
	}
}

func TestWaitQueueTimeoutAndCancel(t *testing.T) {
	p, rs := newTestPool(t, Options{QueueLength: 5, QueueTimeout: 100 * time.Millisecond}, "http://a:1")
	rs[0].MaxConcurrency = 1
	held, _ := p.Acquire(nil, nil)
	defer held.Release(Success)
	start := time.Now()
	if _, err := p.AcquireWait(context.Background(), nil, nil); !errors.Is(err, ErrQueueTimeout) {
		t.Fatalf("queue timeout: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("gave up after %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.AcquireWait(ctx, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	// No queue: saturation answers at once.
	p2, rs2 := newTestPool(t, Options{}, "http://a:1")
	rs2[0].MaxConcurrency = 1
	h2, _ := p2.Acquire(nil, nil)
	defer h2.Release(Success)
	if _, err := p2.AcquireWait(context.Background(), nil, nil); err != ErrSaturated {
		t.Fatalf("no queue: %v", err)
	}
}

// BenchmarkAcquireRelease measures the hot path: pick, breaker Allow, slot,
// release with the outcome. gobreaker's done callback is its one allocation.
func BenchmarkAcquireRelease(b *testing.B) {
	p := NewWithOptions(b.Name(), &rotate{}, Options{QueueLength: 100, QueueTimeout: time.Second})
	defer p.Close()
	var rs []*Replica
	for _, u := range []string{"http://a:1", "http://b:1", "http://c:1", "http://d:1"} {
		r, _ := NewReplica(u)
		rs = append(rs, r)
	}
	p.Set(rs)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := p.AcquireWait(ctx, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			l.Release(Success)
		}
	})
}

func TestBreakerChangesReachTheNewestPool(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	listen := func(who string) func(string, BreakerState, BreakerState) {
		return func(url string, from, to BreakerState) {
			mu.Lock()
			heard = append(heard, who+" "+url+" "+from.String()+">"+to.String())
			mu.Unlock()
		}
	}
	s := BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 500 * time.Millisecond}
	kept := keep.New()
	p1 := NewWithOptions(t.Name(), &rotate{}, Options{Breaker: s, OnBreakerChange: listen("old"), Kept: kept})
	p1.Set(replicas(t, "http://a:1"))
	runOn(t, p1, p1.Replicas()[0], Failure)
	// A reload: the new configuration's pool takes over the breaker and
	// hears its later changes.
	p2 := NewWithOptions(t.Name(), &rotate{}, Options{Breaker: s, OnBreakerChange: listen("new"), Kept: kept})
	p2.Set(replicas(t, "http://a:1"))
	p1.Close()
	defer p2.Close()
	waitState(t, p2.Replicas()[0], StateHalfOpen)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"old http://a:1 closed>open", "new http://a:1 open>half-open"}
	if len(heard) != 2 || heard[0] != want[0] || heard[1] != want[1] {
		t.Fatalf("heard %q, want %q", heard, want)
	}
}

func TestReplicaRemovedAndAddedBack(t *testing.T) {
	kept := keep.New()
	p := NewWithOptions(t.Name(), &rotate{}, Options{Breaker: BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}, Kept: kept})
	a := replicas(t, "http://a:1")
	p.Set(a)
	p.Set(nil)
	if len(kept.Keys()) != 0 {
		t.Fatal("removed replica kept its breaker")
	}
	p.Set(a) // the same object again
	runOn(t, p, a[0], Failure)
	if a[0].BreakerState() != StateOpen || len(kept.Keys()) != 1 {
		t.Fatalf("re-added replica: state %v, %d breakers", a[0].BreakerState(), len(kept.Keys()))
	}
	p.Close()
	if len(kept.Keys()) != 0 {
		t.Fatal("close kept the breaker")
	}
}
