package pool

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/keep"
)

// Errors from Acquire.
var (
	// ErrNoReplicas: the pool has no usable replica (none known, or every
	// one excluded by the caller).
	ErrNoReplicas = errors.New("no healthy replica")
	// ErrSaturated: every usable replica is at its concurrency cap.
	ErrSaturated = errors.New("every replica is at its concurrency limit")
	// ErrBreakersOpen: every replica not excluded has its circuit breaker
	// open (or half-open with its probes in flight). It is an ErrNoReplicas.
	ErrBreakersOpen = fmt.Errorf("%w: every replica's circuit breaker is open", ErrNoReplicas)
	// ErrQueueFull and ErrQueueTimeout end a wait for a free slot; both are
	// ErrSaturated.
	ErrQueueFull    = fmt.Errorf("%w; the wait queue is full", ErrSaturated)
	ErrQueueTimeout = fmt.Errorf("%w; no slot freed in time", ErrSaturated)
	// ErrShed: a sheddable request refused at once, the pool being
	// saturated (see Pool.Saturated). It is an ErrSaturated.
	ErrShed = fmt.Errorf("%w; sheddable requests are refused until it is not", ErrSaturated)
)

// Options configure a pool beyond its policy.
type Options struct {
	// Breaker configures each replica's circuit breaker.
	Breaker BreakerSettings
	// QueueLength bounds how many requests may wait for a slot when every
	// usable replica is at its cap; 0 means no waiting.
	QueueLength int
	// QueueTimeout bounds one request's wait for a slot.
	QueueTimeout time.Duration
	// QueueOrder is the order in which waiters get freed slots: fair
	// between tenants (the default) or first come, first served.
	QueueOrder QueueOrder
	// Reserve is the number of the pool's slots that sheddable requests
	// may not take: while no more than Reserve are free, the pool counts
	// as saturated for them (ErrShed), so that the higher classes find a
	// slot free rather than wait for one. 0 keeps none.
	Reserve int
	// NoShed lets sheddable requests wait in the queue (last) like the
	// others, rather than be refused at once when the pool is saturated.
	NoShed bool
	// ShedKV is the KV-cache usage (0..1), as a replica's engine reports
	// it, from which the replica counts as saturated for sheddable work;
	// 0 means DefaultShedKV.
	ShedKV float64
	// OnBreakerChange, when set, hears every breaker state change.
	OnBreakerChange func(replica string, from, to BreakerState)
	// Kept shares the breakers, by model, replica URL and settings, with
	// the pools of other configurations, so that a reload keeps what they
	// learned; nil keeps them in the pool alone.
	Kept *keep.Store
	// Slow configures the detection of slow replicas (slow.go); on by
	// default.
	Slow SlowSettings
}

// Pool is the replica set of one model type.
type Pool struct {
	name     string
	policy   Policy
	opts     Options
	replicas atomic.Pointer[[]*Replica]

	setMu  sync.Mutex // serialises Set and Close
	closed bool

	waiting atomic.Int32 // requests in the wait queue
	queue   waitQueue

	// slow judges the replicas' latencies; nil when turned off.
	slow *slowDetector
}

// New returns an empty pool that picks with policy, with default breakers
// and no wait queue.
func New(name string, policy Policy) *Pool { return NewWithOptions(name, policy, Options{}) }

// NewWithOptions returns an empty pool with the given options. Close it
// when done, so the breakers it shares can be let go.
func NewWithOptions(name string, policy Policy, o Options) *Pool {
	if o.Kept == nil {
		o.Kept = keep.New()
	}
	p := &Pool{name: name, policy: policy, opts: o, slow: newSlowDetector(o.Slow)}
	p.queue.order = o.QueueOrder
	p.replicas.Store(&[]*Replica{})
	return p
}

// Policy is the pool's balancing policy.
func (p *Pool) Policy() Policy { return p.policy }

// Name is the model type the pool serves.
func (p *Pool) Name() string { return p.name }

// Breaker returns the pool's breaker settings, defaults filled.
func (p *Pool) Breaker() BreakerSettings { return p.opts.Breaker.WithDefaults() }

// Replicas returns the current set; callers must not modify it.
func (p *Pool) Replicas() []*Replica { return *p.replicas.Load() }

// Set replaces the replica set. A replica whose settings did not change
// keeps its object, so its outstanding count stays true across updates.
// Every replica gets the circuit breaker registered for its model and URL:
// the same breaker across updates and config reloads.
func (p *Pool) Set(next []*Replica) {
	p.setMu.Lock()
	defer p.setMu.Unlock()
	prev := p.Replicas()
	old := make(map[string]*Replica, len(prev))
	for _, r := range prev {
		old[r.URL] = r
	}
	merged := make([]*Replica, len(next))
	for i, r := range next {
		if o, ok := old[r.URL]; ok && sameConfig(o, r) {
			merged[i] = o
		} else {
			merged[i] = r
		}
		if !p.closed {
			p.attach(merged[i])
		}
	}
	p.replicas.Store(&merged)
	if p.slow != nil {
		p.slow.attach(merged)
	}
	for _, o := range prev {
		if !slices.Contains(merged, o) {
			p.detach(o)
		}
	}
	if w, ok := p.policy.(ReplicaWatcher); ok {
		w.ReplicasChanged(merged)
	}
	p.signal()
}

// Close lets go of the pool's breakers; the pool must not be Set again.
// Requests in flight may still finish on its replicas.
func (p *Pool) Close() {
	p.setMu.Lock()
	defer p.setMu.Unlock()
	p.closed = true
	for _, r := range p.Replicas() {
		p.detach(r)
	}
}

func (p *Pool) attach(r *Replica) {
	if r.bkey != "" && !r.detached {
		return
	}
	r.detached = false
	r.bkey = breakerKey + p.name + "\x00" + r.URL + "\x00" + p.opts.Breaker.key()
	v, _, _ := p.opts.Kept.LoadOrNew(r.bkey, func() (any, error) { return newBreaker(p.name+" "+r.URL, p.opts.Breaker), nil })
	b := v.(*breaker)
	r.breaker.Store(b)
	if on := p.opts.OnBreakerChange; on != nil && b != nil {
		url := r.URL
		f := func(from, to BreakerState) { on(url, from, to) }
		b.onChange.Store(&f)
	}
}

func (p *Pool) detach(r *Replica) {
	if r.bkey != "" && !r.detached {
		r.detached = true
		_, _ = p.opts.Kept.Delete(r.bkey)
	}
}

// breakerKey starts the keys of the breakers in the Kept store.
const breakerKey = "pool.breaker\x00"

// Lease is a slot on a replica, taken by Acquire. Release it exactly once
// with the outcome of the request, streams included: that both frees the
// slot and reports to the replica's breaker.
type Lease struct {
	Replica *Replica
	// Choice is the policy's decision that led to Replica.
	Choice Choice
	pool   *Pool
	done   func(error)
	tenant string // the request's user, for the wait queue's counters
	share  float64
	// prefill is Choice.Prefill while it counts in the replica's pending
	// prefill work.
	prefill int64
	// sheddable: the request counts in the replica's sheddable ones.
	sheddable bool
	// The answer's timing and size, for the detection of slow replicas:
	// start is zero when the pool does not detect them.
	req            *Request
	start, first   time.Time
	prompt, output int // set by Tokens; prompt -1 when unknown
}

// FirstToken tells the pool the request's first token arrived: its
// prefill is done and no longer queues ahead of others, and the time to
// it is one of the replica's latency figures.
func (l *Lease) FirstToken() {
	if !l.start.IsZero() && l.first.IsZero() && l.Replica != nil {
		l.first = l.pool.slow.now()
	}
	l.prefillDone()
}

// prefillDone takes the request's prefill out of the replica's pending
// work; Release does it for a request that never had a first token.
func (l *Lease) prefillDone() {
	if l.prefill != 0 && l.Replica != nil {
		l.Replica.pending.Add(-l.prefill)
		if l.sheddable {
			l.Replica.pendingSheddable.Add(-l.prefill)
		}
		l.prefill = 0
		l.Replica.pendingChanged()
	}
}

// Tokens tells the pool the size of the answer about to be released: the
// prompt tokens its replica prefilled (those not found in its prefix
// cache; negative when unknown: the pool estimates them) and its output
// tokens, so that its timing can be put in proportion.
func (l *Lease) Tokens(prompt, output int) { l.prompt, l.output = prompt, output }

// Release frees the slot and tells the breaker how the request went. A
// second call does nothing.
func (l *Lease) Release(o Outcome) {
	r := l.Replica
	if r == nil {
		return
	}
	l.prefillDone()
	if o == Success && !l.start.IsZero() {
		l.observe(r)
	}
	l.Replica = nil
	r.Release()
	if l.sheddable {
		r.sheddable.Add(-1)
	}
	if b := r.breaker.Load(); b != nil {
		b.outcome(o)
	}
	if l.done != nil {
		l.done(o.err())
		l.done = nil
	}
	if l.pool != nil {
		l.pool.signal()
	}
}

// Acquire has the pool's policy pick a replica for req among those not in
// exclude whose breaker lets the request through, and takes a slot on it.
// exclude holds replicas already tried for this request.
func (p *Pool) Acquire(req *Request, exclude []*Replica) (Lease, error) {
	if req == nil {
		req = &Request{Model: p.name}
	}
	all := p.Replicas()
	var buf [16]*Replica
	candidates := buf[:0]
	sawFull, sawOpen := false, false
	for _, r := range all {
		switch {
		case slices.Contains(exclude, r), !r.Healthy():
		case r.breakerOpen():
			sawOpen = true
		case r.full():
			sawFull = true
		default:
			candidates = append(candidates, r)
		}
	}
	// The replicas judged slow are held back, each by its chance; they
	// are tried when none of the others could take the request.
	var held []*Replica
	avoided := 0
	if p.slow != nil && len(candidates) > 1 {
		if k := p.slow.partition(candidates); k > 0 {
			candidates, held, avoided = candidates[:k], candidates[k:], len(candidates)-k
		}
	}
	for len(candidates) > 0 || len(held) > 0 {
		if len(candidates) == 0 {
			candidates, held, avoided = held, nil, 0 // slow beats no answer
		}
		c := p.policy.Select(req, candidates)
		r := c.Replica
		if r == nil || !slices.Contains(candidates, r) {
			// A policy broke its contract; fall back to the first candidate
			// rather than route nowhere.
			r = candidates[0]
			c = Pick(r, ReasonLoad)
		}
		candidates = remove(candidates, r)
		if !r.tryAcquire() {
			sawFull = true // lost a race for the last slot; try the others
			continue
		}
		var done func(error)
		if b := r.breaker.Load(); b != nil {
			d, err := b.cb.Load().Allow()
			if err != nil { // opened meanwhile, or half-open with its probes out
				r.Release()
				sawOpen = true
				continue
			}
			done = d
		}
		c.SlowAvoided = avoided
		l := Lease{Replica: r, Choice: c, pool: p, done: done, prefill: c.Prefill, prompt: -1}
		if req.Priority <= api.PrioritySheddable {
			r.sheddable.Add(1)
			r.pendingSheddable.Add(c.Prefill)
			l.sheddable = true
		}
		if c.Prefill != 0 {
			r.pending.Add(c.Prefill)
			r.pendingChanged()
		}
		if p.slow != nil {
			l.req, l.start = req, p.slow.now()
		}
		return l, nil
	}
	switch {
	case sawFull:
		return Lease{}, ErrSaturated
	case sawOpen:
		return Lease{}, ErrBreakersOpen
	}
	return Lease{}, ErrNoReplicas
}

// Waiting is the number of requests in the wait queue.
func (p *Pool) Waiting() int { return int(p.waiting.Load()) }

// QueueTimeout is the longest a request waits for a slot.
func (p *Pool) QueueTimeout() time.Duration { return p.opts.QueueTimeout }

// remove deletes r from list in place (order is not kept).
func remove(list []*Replica, r *Replica) []*Replica {
	for i, x := range list {
		if x == r {
			last := len(list) - 1
			list[i] = list[last]
			return list[:last]
		}
	}
	return list
}
