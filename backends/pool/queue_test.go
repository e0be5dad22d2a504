package pool

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
)

// queued starts a waiter for user in the background and waits until it is
// in the queue; its result arrives on the returned channel.
type waitResult struct {
	user  string
	lease Lease
	err   error
}

func enqueue(t *testing.T, p *Pool, user string, exclude []*Replica, out chan<- waitResult) {
	t.Helper()
	enqueueRequest(t, p, &Request{User: user, Messages: []api.Message{{Role: "user", Content: "some prompt text"}}}, exclude, out)
}

// enqueueRequest starts a wait for req and returns once it is queued.
func enqueueRequest(t *testing.T, p *Pool, req *Request, exclude []*Replica, out chan<- waitResult) {
	t.Helper()
	before := p.Waiting()
	go func() {
		l, err := p.AcquireWait(context.Background(), req, exclude)
		out <- waitResult{req.User, l, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for p.Waiting() != before+1 {
		if time.Now().After(deadline) {
			t.Fatal("waiter never queued")
		}
		time.Sleep(time.Millisecond)
	}
}

// serveOrder releases the held slot, then every slot served, one at a
// time, and returns who was served in which order.
func serveOrder(t *testing.T, p *Pool, held Lease, n int, out chan waitResult) []string {
	t.Helper()
	var order []string
	held.Release(Success)
	for i := 0; i < n; i++ {
		select {
		case r := <-out:
			if r.err != nil {
				t.Fatalf("%s: %v", r.user, r.err)
			}
			order = append(order, r.user)
			r.lease.Charge(100) // its completion
			r.lease.Release(Success)
		case <-time.After(10 * time.Second):
			t.Fatalf("served %v, then nobody", order)
		}
	}
	return order
}

func TestQueueOrder(t *testing.T) {
	tests := []struct {
		name   string
		order  QueueOrder
		arrive []string
		want   []string
	}{
		{name: "fifo: arrival order", order: OrderFIFO,
			arrive: []string{"heavy", "heavy", "heavy", "heavy", "light"},
			want:   []string{"heavy", "heavy", "heavy", "heavy", "light"}},
		// The light user arrives last and starts at the heavy user's
		// counter; with fewer requests waiting, it goes first.
		{name: "fair: a light user does not wait behind a heavy one", order: OrderFair,
			arrive: []string{"heavy", "heavy", "heavy", "heavy", "light"},
			want:   []string{"light", "heavy", "heavy", "heavy", "heavy"}},
		{name: "fair: tenants alternate", order: OrderFair,
			arrive: []string{"a", "a", "a", "b", "b", "b"},
			want:   []string{"a", "b", "a", "b", "a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, rs := newTestPool(t, Options{QueueLength: 10, QueueTimeout: time.Minute, QueueOrder: tt.order}, "http://a:1")
			rs[0].MaxConcurrency = 1
			held, err := p.Acquire(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := make(chan waitResult, len(tt.arrive))
			for _, u := range tt.arrive {
				enqueue(t, p, u, nil, out)
			}
			got := serveOrder(t, p, held, len(tt.arrive), out)
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("served %v, want %v", got, tt.want)
				}
			}
			if p.Waiting() != 0 || rs[0].Outstanding() != 0 {
				t.Errorf("waiting %d, outstanding %d", p.Waiting(), rs[0].Outstanding())
			}
		})
	}
}

// A tenant that idled does not come back ahead of everyone for as long as
// it was away: it starts at the smallest counter of the tenants waiting.
func TestQueueLiftsAnIdleTenant(t *testing.T) {
	q := waitQueue{order: OrderFair}
	a1 := &waiter{tenant: "a"}
	q.push(a1)
	q.charge("a", 1000)
	b1 := &waiter{tenant: "b"}
	q.push(b1)
	if q.vtc["b"] != 1000 {
		t.Fatalf("b starts at %v, want a's 1000", q.vtc["b"])
	}
	q.charge("b", 10)
	// a's counter is now the smaller one: a goes first.
	a2 := &waiter{tenant: "a"}
	q.push(a2)
	if next := q.next(); next != a1 {
		t.Fatalf("next is %s#%d", next.tenant, next.seq)
	}
	// Once the queue empties, the counters are forgotten.
	q.remove(a1)
	q.remove(a2)
	q.remove(b1)
	if len(q.vtc) != 0 || len(q.queued) != 0 {
		t.Errorf("counters kept after the queue emptied: %v %v", q.vtc, q.queued)
	}
}

// While anyone waits, a newcomer queues even when it finds a slot free: a
// freed slot goes to the queue's choice, not to whoever asks first.
func TestQueueNoBarging(t *testing.T) {
	p, rs := newTestPool(t, Options{QueueLength: 10, QueueTimeout: time.Minute, QueueOrder: OrderFIFO}, "http://a:1")
	rs[0].MaxConcurrency = 1
	held, _ := p.Acquire(nil, nil)
	out := make(chan waitResult, 2)
	enqueue(t, p, "first", nil, out)
	enqueue(t, p, "second", nil, out)
	got := serveOrder(t, p, held, 2, out)
	if got[0] != "first" || got[1] != "second" {
		t.Fatalf("served %v", got)
	}
}

// A waiter that already tried the only free replica is passed over, and
// the next waiter gets the slot.
func TestQueueSkipsAWaiterBlockedByItsExclusions(t *testing.T) {
	p, rs := newTestPool(t, Options{QueueLength: 10, QueueTimeout: time.Minute, QueueOrder: OrderFIFO}, "http://a:1", "http://b:1")
	rs[0].MaxConcurrency, rs[1].MaxConcurrency = 1, 1
	la, _ := p.Acquire(nil, []*Replica{rs[1]})
	lb, _ := p.Acquire(nil, []*Replica{rs[0]})
	out := make(chan waitResult, 2)
	enqueue(t, p, "retry", []*Replica{rs[0]}, out) // tried a, wants b
	enqueue(t, p, "fresh", nil, out)
	la.Release(Success) // a frees: only "fresh" can use it
	r := <-out
	if r.user != "fresh" || r.lease.Replica != rs[0] {
		t.Fatalf("%s got %v", r.user, r.lease.Replica)
	}
	lb.Release(Success)
	r2 := <-out
	if r2.user != "retry" || r2.lease.Replica != rs[1] {
		t.Fatalf("%s got %v", r2.user, r2.lease.Replica)
	}
	r.lease.Release(Success)
	r2.lease.Release(Success)
}

// Many tenants acquiring, giving up and releasing at once: every slot
// handed out comes back, nobody is left in the queue, nothing deadlocks.
func TestQueueUnderContention(t *testing.T) {
	for _, order := range []QueueOrder{OrderFair, OrderFIFO} {
		t.Run(order.String(), func(t *testing.T) {
			p, rs := newTestPool(t, Options{QueueLength: 50, QueueTimeout: 20 * time.Millisecond, QueueOrder: order},
				"http://a:1", "http://b:1")
			rs[0].MaxConcurrency, rs[1].MaxConcurrency = 2, 2
			var wg sync.WaitGroup
			var served, refused atomic.Int64
			for g := 0; g < 40; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					user := []string{"a", "b", "c"}[g%3]
					for i := 0; i < 30; i++ {
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(15))*time.Millisecond)
						l, err := p.AcquireWait(ctx, &Request{User: user}, nil)
						cancel()
						if err != nil {
							if !errors.Is(err, ErrSaturated) && !errors.Is(err, context.DeadlineExceeded) {
								t.Errorf("unexpected error %v", err)
							}
							refused.Add(1)
							continue
						}
						served.Add(1)
						time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
						l.Charge(10)
						l.Release(Success)
					}
				}(g)
			}
			wg.Wait()
			if rs[0].Outstanding() != 0 || rs[1].Outstanding() != 0 || p.Waiting() != 0 {
				t.Fatalf("outstanding %d+%d, waiting %d", rs[0].Outstanding(), rs[1].Outstanding(), p.Waiting())
			}
			if served.Load() == 0 {
				t.Fatal("nobody was served")
			}
			t.Logf("served %d, refused %d", served.Load(), refused.Load())
		})
	}
}

func TestParseQueueOrder(t *testing.T) {
	for in, want := range map[string]QueueOrder{"": OrderFair, "fair": OrderFair, "fifo": OrderFIFO} {
		if got, err := ParseQueueOrder(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseQueueOrder("lifo"); err == nil {
		t.Error("lifo accepted")
	}
}

// BenchmarkQueueFairness measures the queue alone: a light tenant's wait
// for a slot while a heavy tenant keeps 64 requests going on 32 slots
// (requests of 50–550 ms, so slots free at varied times), fair against
// FIFO:
//
//	go test ./backends/pool -run '^$' -bench QueueFairness -benchtime 1x
func BenchmarkQueueFairness(b *testing.B) {
	for _, order := range []QueueOrder{OrderFair, OrderFIFO} {
		b.Run(order.String(), func(b *testing.B) {
			p, rs := newTestPool(b, Options{QueueLength: 500, QueueTimeout: time.Minute, QueueOrder: order}, "http://a:1", "http://b:1")
			rs[0].MaxConcurrency, rs[1].MaxConcurrency = 16, 16
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			msgs := []api.Message{{Role: "user", Content: "hello there"}}
			for i := 0; i < 64; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						l, err := p.AcquireWait(ctx, &Request{User: "heavy", Messages: msgs}, nil)
						if err != nil {
							continue
						}
						time.Sleep(time.Duration(50+rand.IntN(500)) * time.Millisecond)
						l.Charge(30)
						l.Release(Success)
					}
				}()
			}
			time.Sleep(time.Second)
			var waits []time.Duration
			for i := 0; i < 40; i++ {
				start := time.Now()
				l, err := p.AcquireWait(context.Background(), &Request{User: "light", Messages: msgs}, nil)
				if err != nil {
					b.Fatal(err)
				}
				waits = append(waits, time.Since(start))
				l.Release(Excluded)
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			slices.Sort(waits)
			b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1e3, "p50-wait-ms")
			b.ReportMetric(float64(waits[len(waits)*9/10].Microseconds())/1e3, "p90-wait-ms")
		})
	}
}
