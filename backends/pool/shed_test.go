package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
)

// enqueueClass is enqueue for a request of class prio.
func enqueueClass(t *testing.T, p *Pool, user string, prio api.Priority, out chan<- waitResult) {
	t.Helper()
	enqueueRequest(t, p, &Request{User: user, Priority: prio,
		Messages: []api.Message{{Role: "user", Content: "some prompt text"}}}, nil, out)
}

// A higher class goes first whatever the order; the fair order still
// shares within a class.
func TestQueueClassesFirst(t *testing.T) {
	crit, std, shed := api.PriorityCritical, api.PriorityStandard, api.PrioritySheddable
	type arrival struct {
		user string
		prio api.Priority
	}
	tests := []struct {
		name   string
		order  QueueOrder
		arrive []arrival
		want   []string
	}{
		{name: "fifo: critical before standard before sheddable", order: OrderFIFO,
			arrive: []arrival{{"batch", shed}, {"std", std}, {"std", std}, {"crit", crit}},
			want:   []string{"crit", "std", "std", "batch"}},
		{name: "fair: within a class, tenants alternate", order: OrderFair,
			arrive: []arrival{{"a", std}, {"a", std}, {"b", std}, {"b", std}, {"c", crit}},
			want:   []string{"c", "a", "b", "a", "b"}},
		{name: "fair: a light critical tenant before a heavy critical one, both before standard", order: OrderFair,
			arrive: []arrival{{"s", std}, {"h", crit}, {"h", crit}, {"h", crit}, {"l", crit}},
			want:   []string{"l", "h", "h", "h", "s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// NoShed: the sheddable waiter queues, to show it goes last.
			p, rs := newTestPool(t, Options{QueueLength: 10, QueueTimeout: time.Minute, QueueOrder: tt.order, NoShed: true}, "http://a:1")
			rs[0].MaxConcurrency = 1
			held, err := p.Acquire(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := make(chan waitResult, len(tt.arrive))
			for _, a := range tt.arrive {
				enqueueClass(t, p, a.user, a.prio, out)
			}
			if got := p.WaitingByClass(); got[0]+got[1]+got[2] != len(tt.arrive) {
				t.Errorf("waiting by class %v, want %d in all", got, len(tt.arrive))
			}
			got := serveOrder(t, p, held, len(tt.arrive), out)
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("served %v, want %v", got, tt.want)
				}
			}
			if got := p.WaitingByClass(); got != [3]int{} {
				t.Errorf("waiting by class %v after the queue emptied", got)
			}
		})
	}
}

func TestShed(t *testing.T) {
	sheddable := &Request{Priority: api.PrioritySheddable}
	batchLine := &Request{Priority: api.PrioritySheddable, NoWait: true, EngineByClass: true}
	tests := []struct {
		name     string
		opts     Options
		caps     []int // per replica; 0 = no cap
		taken    int   // slots taken on the first replica before asking
		engine   *EngineLoad
		req      *Request // nil: sheddable
		wantShed bool
	}{
		{name: "a free slot, no reserve", caps: []int{2}, taken: 1},
		{name: "every slot taken", caps: []int{2}, taken: 2, wantShed: true},
		{name: "free slots within the reserve", opts: Options{Reserve: 2}, caps: []int{2, 1}, taken: 1, wantShed: true},
		{name: "free slots beyond the reserve", opts: Options{Reserve: 1}, caps: []int{2, 1}, taken: 1},
		{name: "no cap, engine idle", caps: []int{0}},
		{name: "no cap, engine queueing", caps: []int{0}, engine: &EngineLoad{Waiting: 3, KVUsage: 0.2}, wantShed: true},
		{name: "no cap, engine KV full", caps: []int{0}, engine: &EngineLoad{KVUsage: 0.97}, wantShed: true},
		{name: "engine KV below the threshold", caps: []int{0}, opts: Options{ShedKV: 0.99}, engine: &EngineLoad{KVUsage: 0.97}},
		{name: "shedding off", opts: Options{NoShed: true}, caps: []int{1}, taken: 1},
		// A batch line on engines ordering by class: a queue of the
		// gateway's own sheddable work is no saturation for it.
		{name: "by class: the engine queues only the gateway's sheddable work", caps: []int{0},
			engine: &EngineLoad{Running: 8, Waiting: 2, OwnSheddable: 3, KVUsage: 0.5}, req: batchLine},
		{name: "by class: the engine's queue holds a better request", caps: []int{0},
			engine: &EngineLoad{Running: 8, Waiting: 4, OwnSheddable: 3, KVUsage: 0.5}, req: batchLine, wantShed: true},
		{name: "by class: the engine's KV cache full", caps: []int{0},
			engine: &EngineLoad{Waiting: 1, OwnSheddable: 3, KVUsage: 0.97}, req: batchLine, wantShed: true},
		{name: "by class, slots within the reserve", opts: Options{Reserve: 1}, caps: []int{2}, taken: 1,
			engine: &EngineLoad{Waiting: 1, OwnSheddable: 1}, req: batchLine, wantShed: true},
		{name: "engines not by class: any queue saturates", caps: []int{0},
			engine: &EngineLoad{Running: 8, Waiting: 2, OwnSheddable: 3, KVUsage: 0.5},
			req:    &Request{Priority: api.PrioritySheddable, NoWait: true}, wantShed: true},
		{name: "by class, an online sheddable request waits behind the queue", caps: []int{0},
			engine: &EngineLoad{Running: 8, Waiting: 2, OwnSheddable: 3, KVUsage: 0.5},
			req:    &Request{Priority: api.PrioritySheddable, EngineByClass: true}, wantShed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			urls := []string{"http://a:1", "http://b:1", "http://c:1"}[:len(tt.caps)]
			tt.opts.QueueLength, tt.opts.QueueTimeout = 10, 50*time.Millisecond
			p, rs := newTestPool(t, tt.opts, urls...)
			for i, c := range tt.caps {
				rs[i].MaxConcurrency = c
			}
			for i := 0; i < tt.taken; i++ {
				if !rs[0].tryAcquire() {
					t.Fatal("no slot to take")
				}
			}
			if tt.engine != nil {
				l := *tt.engine
				l.Until = time.Now().Add(time.Minute)
				rs[0].SetEngineLoad(l)
			}
			req := tt.req
			if req == nil {
				req = sheddable
			}
			start := time.Now()
			l, err := p.AcquireWait(context.Background(), req, nil)
			if got := errors.Is(err, ErrShed); got != tt.wantShed {
				t.Fatalf("shed = %v (%v), want %v", got, err, tt.wantShed)
			}
			if tt.wantShed && time.Since(start) > 20*time.Millisecond {
				t.Errorf("shed after %v: not at once", time.Since(start))
			}
			if err == nil {
				l.Release(Success)
			}
			// A standard request is never shed.
			if _, err := p.AcquireWait(context.Background(), &Request{}, nil); errors.Is(err, ErrShed) {
				t.Errorf("a standard request was shed")
			}
		})
	}
}

// While a request waits, a sheddable newcomer is refused at once.
func TestShedWhileQueued(t *testing.T) {
	p, rs := newTestPool(t, Options{QueueLength: 10, QueueTimeout: time.Minute}, "http://a:1")
	rs[0].MaxConcurrency = 1
	held, _ := p.Acquire(nil, nil)
	out := make(chan waitResult, 1)
	enqueueClass(t, p, "std", api.PriorityStandard, out)
	if _, err := p.AcquireWait(context.Background(), &Request{Priority: api.PrioritySheddable}, nil); !errors.Is(err, ErrShed) {
		t.Fatalf("sheddable while a request waits: %v, want ErrShed", err)
	}
	serveOrder(t, p, held, 1, out)
}

// The queue timeout bounds a request's waits together, over its attempts.
func TestQueueTimeoutCountsEarlierWaits(t *testing.T) {
	// Bounds far apart, so that a loaded machine's late timers cannot
	// blur them: the whole limit, what is left of it, nothing.
	p, rs := newTestPool(t, Options{QueueLength: 10, QueueTimeout: time.Second}, "http://a:1")
	rs[0].MaxConcurrency = 1
	held, _ := p.Acquire(nil, nil)
	defer held.Release(Success)
	for _, tc := range []struct {
		waited time.Duration
		min    time.Duration
		max    time.Duration
	}{
		{waited: 0, min: 950 * time.Millisecond, max: 5 * time.Second},
		{waited: 800 * time.Millisecond, min: 150 * time.Millisecond, max: 700 * time.Millisecond},
		{waited: 2 * time.Second, min: 0, max: 100 * time.Millisecond},
	} {
		start := time.Now()
		_, err := p.AcquireWait(context.Background(), &Request{Waited: tc.waited}, nil)
		took := time.Since(start)
		if !errors.Is(err, ErrQueueTimeout) || took < tc.min || took > tc.max {
			t.Errorf("waited %v before: %v after %v, want ErrQueueTimeout in [%v, %v]", tc.waited, err, took, tc.min, tc.max)
		}
	}
}

// A NoWait request (a batch's line) never waits, even where sheddable
// requests queue (NoShed): refused at once while the pool is saturated,
// served while a slot is free above the reserve.
func TestNoWait(t *testing.T) {
	for _, tt := range []struct {
		name     string
		opts     Options
		taken    int
		wantShed bool
	}{
		{name: "shedding off, every slot taken", opts: Options{NoShed: true}, taken: 2, wantShed: true},
		{name: "shedding off, slots within the reserve", opts: Options{NoShed: true, Reserve: 1}, taken: 1, wantShed: true},
		{name: "shedding off, a slot above the reserve", opts: Options{NoShed: true}, taken: 1},
		{name: "shedding on, every slot taken", taken: 2, wantShed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.QueueLength, tt.opts.QueueTimeout = 10, time.Minute
			p, rs := newTestPool(t, tt.opts, "http://a:1")
			rs[0].MaxConcurrency = 2
			for range tt.taken {
				if !rs[0].tryAcquire() {
					t.Fatal("no slot to take")
				}
			}
			start := time.Now()
			l, err := p.AcquireWait(context.Background(), &Request{Priority: api.PrioritySheddable, NoWait: true}, nil)
			if got := errors.Is(err, ErrShed); got != tt.wantShed {
				t.Fatalf("shed = %v (%v), want %v", got, err, tt.wantShed)
			}
			if time.Since(start) > 50*time.Millisecond || p.Waiting() != 0 {
				t.Errorf("waited %v, %d waiting: a NoWait request queued", time.Since(start), p.Waiting())
			}
			if err == nil {
				l.Release(Success)
			}
		})
	}
}

// A replica counts its sheddable requests in flight, which its engine's
// figures are read beside (EngineLoad.OwnSheddable).
func TestOutstandingSheddable(t *testing.T) {
	p, rs := newTestPool(t, Options{}, "http://a:1")
	online, err := p.Acquire(&Request{Priority: api.PriorityCritical}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []Lease
	for range 2 {
		l, err := p.Acquire(&Request{Priority: api.PrioritySheddable}, nil)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if got, out := rs[0].OutstandingSheddable(), rs[0].Outstanding(); got != 2 || out != 3 {
		t.Fatalf("sheddable %d of %d outstanding, want 2 of 3", got, out)
	}
	lines[0].Release(Success)
	lines[0].Release(Success) // a second release does nothing
	online.Release(Success)
	if got := rs[0].OutstandingSheddable(); got != 1 {
		t.Fatalf("sheddable %d after releases, want 1", got)
	}
	lines[1].Release(Failure)
	if got := rs[0].OutstandingSheddable(); got != 0 {
		t.Fatalf("sheddable %d at the end, want 0", got)
	}
}

// An online request on engines that order by class sees a replica's load
// and queued prefill without the sheddable requests it overtakes.
func TestLoadFor(t *testing.T) {
	p, rs := newTestPool(t, Options{}, "http://a:1")
	take := func(prio api.Priority, prefill int64) Lease {
		t.Helper()
		l, err := p.Acquire(&Request{Priority: prio}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The policy's prediction, as a prefix-aware one makes it.
		rs[0].pending.Add(prefill)
		l.prefill = prefill
		if l.sheddable {
			rs[0].pendingSheddable.Add(prefill)
		}
		return l
	}
	online := take(api.PriorityStandard, 10)
	lines := []Lease{take(api.PrioritySheddable, 100), take(api.PrioritySheddable, 100)}
	for _, tt := range []struct {
		name    string
		req     *Request
		load    float64
		prefill int64
	}{
		{name: "online, by class", req: &Request{Priority: api.PriorityCritical, EngineByClass: true}, load: 1, prefill: 10},
		{name: "online, not by class", req: &Request{Priority: api.PriorityCritical}, load: 3, prefill: 210},
		{name: "sheddable, by class", req: &Request{Priority: api.PrioritySheddable, EngineByClass: true}, load: 3, prefill: 210},
		{name: "no request", load: 3, prefill: 210},
	} {
		if got := rs[0].LoadFor(tt.req); got != tt.load {
			t.Errorf("%s: LoadFor = %v, want %v", tt.name, got, tt.load)
		}
		if got := rs[0].PendingPrefillFor(tt.req); got != tt.prefill {
			t.Errorf("%s: PendingPrefillFor = %v, want %v", tt.name, got, tt.prefill)
		}
	}
	lines[0].FirstToken()
	lines[0].Release(Success)
	lines[1].Release(Success)
	online.Release(Success)
	if p, s := rs[0].PendingPrefill(), rs[0].pendingSheddable.Load(); p != 0 || s != 0 {
		t.Fatalf("pending prefill %d, of sheddable %d after every release, want 0", p, s)
	}
}
