package pool

import (
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/keep"
)

// Readmit closes an open breaker at once, and is heard as open>closed; a
// closed breaker is reset (the dead process's failures forgotten) without
// a report.
func TestReadmitClosesOpenBreaker(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	o := Options{Breaker: BreakerSettings{ConsecutiveFailures: 2, OpenTimeout: time.Hour},
		OnBreakerChange: func(_ string, from, to BreakerState) {
			mu.Lock()
			heard = append(heard, from.String()+">"+to.String())
			mu.Unlock()
		}}
	p, rs := newTestPool(t, o, "http://a:1", "http://b:1")
	a, b := rs[0], rs[1]
	runOn(t, p, a, Failure)
	runOn(t, p, a, Failure)
	if a.BreakerState() != StateOpen {
		t.Fatal("breaker did not open")
	}
	if !a.Readmit() || a.BreakerState() != StateClosed {
		t.Fatalf("readmit left the breaker %v", a.BreakerState())
	}
	runOn(t, p, a, Success) // selectable again

	runOn(t, p, b, Failure) // one failure short of tripping
	if b.Readmit() {
		t.Error("readmit reported closing a closed breaker")
	}
	runOn(t, p, b, Failure)
	if b.BreakerState() != StateClosed {
		t.Error("a reset breaker tripped on the failures it had before")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"closed>open", "open>closed"}; len(heard) != 2 || heard[0] != want[0] || heard[1] != want[1] {
		t.Errorf("heard %q, want %q", heard, want)
	}
}

// A lease taken before a readmission reports to the breaker it was taken
// on: its failure neither trips the new breaker nor is heard.
func TestReadmitIgnoresLeasesOfTheOldBreaker(t *testing.T) {
	heard := 0
	o := Options{Breaker: BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour},
		OnBreakerChange: func(string, BreakerState, BreakerState) { heard++ }}
	p, rs := newTestPool(t, o, "http://a:1")
	a := rs[0]
	l, err := p.Acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Readmit()
	l.Release(Failure)
	if a.BreakerState() != StateClosed || heard != 0 {
		t.Errorf("breaker %v, %d changes heard; want closed, none", a.BreakerState(), heard)
	}
}

// A replica whose breaker opens again within its window after a
// readmission keeps crashing: the next probe does not readmit it. It
// waits out its open timeout, and once it closes through half-open
// requests, a probe may readmit it again.
func TestReadmitRefusedWhileFlapping(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 50 * time.Millisecond, Window: time.Hour}},
		"http://a:1")
	a := rs[0]
	runOn(t, p, a, Failure)
	if !a.Readmit() {
		t.Fatal("first readmission refused")
	}
	runOn(t, p, a, Failure) // crashed again, soon after
	if a.Readmit() || a.BreakerState() != StateOpen {
		t.Fatalf("a flapping replica was readmitted: %v", a.BreakerState())
	}
	waitState(t, a, StateHalfOpen)
	runOn(t, p, a, Success)
	if a.BreakerState() != StateClosed {
		t.Fatalf("half-open success left %v", a.BreakerState())
	}
	runOn(t, p, a, Failure)
	if !a.Readmit() {
		t.Error("a replica that closed by itself is still held as flapping")
	}
}

// The flapping window is the breaker's: a replica that trips again long
// after its last readmission is readmitted again.
func TestReadmitAfterTheWindow(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour, Window: time.Minute}},
		"http://a:1")
	a := rs[0]
	b := a.breaker.Load()
	now := time.Now()
	b.mu.Lock()
	b.now = func() time.Time { return now }
	b.mu.Unlock()
	runOn(t, p, a, Failure)
	a.Readmit()
	now = now.Add(2 * time.Minute)
	runOn(t, p, a, Failure)
	if !a.Readmit() {
		t.Error("a trip outside the window after the readmission was taken for flapping")
	}
}

// A replica its source stops listing and lists again (deregistered while
// it restarts, then registered) comes back with a closed breaker.
func TestRelistedReplicaComesBackClosed(t *testing.T) {
	kept := keep.New()
	p := NewWithOptions(t.Name(), &rotate{}, Options{Breaker: BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}, Kept: kept})
	defer p.Close()
	p.Set(replicas(t, "http://a:1", "http://b:1"))
	a := p.Replicas()[0]
	runOn(t, p, a, Failure)
	p.Set(replicas(t, "http://b:1"))
	p.Set(replicas(t, "http://a:1", "http://b:1"))
	if got := p.Replicas()[0].BreakerState(); got != StateClosed {
		t.Errorf("relisted replica's breaker %v, want closed", got)
	}
}

// A request that could not reach a replica marks it unreachable until it
// answers one again, or is readmitted; an unreachable failure counts as a
// failure for the breaker.
func TestUnreachableOutcome(t *testing.T) {
	p, rs := newTestPool(t, Options{Breaker: BreakerSettings{ConsecutiveFailures: 2, OpenTimeout: time.Hour}}, "http://a:1")
	a := rs[0]
	runOn(t, p, a, Failure)
	if a.Unreachable() {
		t.Fatal("a failure that reached the replica marked it unreachable")
	}
	runOn(t, p, a, Unreachable)
	if !a.Unreachable() || a.BreakerState() != StateOpen {
		t.Fatalf("unreachable %v, breaker %v; want true, open", a.Unreachable(), a.BreakerState())
	}
	a.Readmit()
	if a.Unreachable() {
		t.Error("readmitted, still unreachable")
	}
	runOn(t, p, a, Unreachable)
	runOn(t, p, a, Success)
	if a.Unreachable() {
		t.Error("answered, still unreachable")
	}
}

// A stream that ends on a replica that left the pool meanwhile (drained)
// leaves no latency figures behind: the replica, listed again, starts
// afresh.
func TestDrainedReplicaLeavesNoFigures(t *testing.T) {
	p, rs, clock := slowPool(t, SlowSettings{}, 2, 0)
	a := rs[0]
	p.Set(rs[1:])
	answer(p, a, clock, 50*time.Millisecond, 10*time.Millisecond)
	p.slow.mu.Lock()
	_, kept := p.slow.reps[a.URL]
	p.slow.mu.Unlock()
	if kept {
		t.Error("a drained replica's answer was recorded")
	}
}
