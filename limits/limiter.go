package limits

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of Options.
const (
	DefaultTimeout = 250 * time.Millisecond
	DefaultLease   = 30 * time.Second
	// probeEvery spaces the pings that look for Redis while it is down.
	probeEvery = 500 * time.Millisecond
	// maxPending bounds the settlements kept while Redis is down; beyond,
	// the oldest are dropped (their slots expire, their reservations
	// stay charged: the safe side).
	maxPending = 100_000
)

// Options configure a Limiter.
type Options struct {
	// Redis, when set, holds the shared state; without it every limit is
	// per instance.
	Redis redis.UniversalClient
	// Prefix starts every Redis key (e.g. "llmedge:").
	Prefix string
	// Timeout bounds every Redis call; DefaultTimeout when 0.
	Timeout time.Duration
	// FailClosed refuses requests while Redis is unreachable, instead of
	// deciding them with the per-instance state.
	FailClosed bool
	// Lease is how long a concurrency slot lives without a refresh (a
	// crashed instance's slots free after it); DefaultLease when 0.
	// Running requests refresh theirs every Lease/3.
	Lease time.Duration
	// OnRedisState hears every change of Redis' reachability (err is nil
	// when it came back); OnRedisError hears every failed call, by
	// operation (admit, settle, refresh, ping).
	OnRedisState func(up bool, err error)
	OnRedisError func(op string)
	// Now is the per-instance store's clock; time.Now when nil.
	Now func() time.Time
	// BudgetSeed starts a budget counter that does not exist yet (in
	// Redis, or in this instance without it) from what was recorded of
	// its period; nil starts it at 0. OnSeedError hears its failures.
	BudgetSeed  BudgetSeed
	OnSeedError func(error)
}

// Limiter admits requests against their buckets' limits. It is safe for
// concurrent use; Start its background work and Close it when done.
type Limiter struct {
	o     Options
	local *localStore
	rs    *redisStore // nil without Redis
	down  atomic.Bool // Redis unreachable: the fallback decides

	idPrefix string
	seq      atomic.Uint64

	mu      sync.Mutex
	live    map[*Ticket]struct{} // Redis tickets holding concurrency slots
	pending []pendingSettle      // settlements Redis missed

	budgets budgets

	errs     [len(redisOps)]atomic.Uint64 // failed Redis calls, by operation
	fallback atomic.Uint64                // decisions made by the fallback

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// redisOps are the Redis operations whose failures Stats counts.
var redisOps = [...]string{"admit", "settle", "refresh", "ping", "lockout"}

// Stats are a Limiter's counters since it was made.
type Stats struct {
	// RedisErrors counts failed Redis calls by operation (admit, settle,
	// refresh, ping, lockout).
	RedisErrors map[string]uint64
	// Fallback counts the admissions decided by the per-instance state
	// while Redis was unreachable.
	Fallback uint64
}

// Stats returns the Limiter's counters.
func (l *Limiter) Stats() Stats {
	st := Stats{RedisErrors: make(map[string]uint64, len(redisOps)), Fallback: l.fallback.Load()}
	for i, op := range redisOps {
		st.RedisErrors[op] = l.errs[i].Load()
	}
	return st
}

type pendingSettle struct {
	keys []string
	args []any
	// script is the settlement's script: the limits' when nil, the
	// budgets' otherwise.
	script *redis.Script
}

// New returns a Limiter; call Start for its background work.
func New(o Options) *Limiter {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	l := &Limiter{o: o, local: newLocalStore(o.Now), live: map[*Ticket]struct{}{},
		idPrefix: hex.EncodeToString(b[:]) + "-", stop: make(chan struct{}),
		budgets: budgets{local: map[string]*localBudget{}, seeding: map[string]*seedCall{}, seen: map[string]BudgetState{}}}
	if o.Redis != nil {
		l.rs = &redisStore{client: o.Redis, prefix: o.Prefix}
	}
	return l
}

// Shared reports whether the limits hold across instances (Redis).
func (l *Limiter) Shared() bool { return l.rs != nil }

// RedisUp reports whether Redis answered the last call; true without Redis.
func (l *Limiter) RedisUp() bool { return l.rs == nil || !l.down.Load() }

// FailClosed reports the failure mode.
func (l *Limiter) FailClosed() bool { return l.o.FailClosed }

// Admit decides req. When allowed, the Ticket must be settled exactly once
// (Settle) when the request ends, however it ends. ctx bounds the Redis
// call with the request's own life; the Limiter's Timeout bounds it too.
func (l *Limiter) Admit(ctx context.Context, req *Request) (*Ticket, Decision) {
	if len(req.Buckets) > MaxBuckets {
		req.Buckets = req.Buckets[:MaxBuckets]
	}
	t := &Ticket{l: l}
	if l.rs != nil && !l.down.Load() {
		t.id = l.idPrefix + strconv.FormatUint(l.seq.Add(1), 36)
		cctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
		d, err := l.rs.admit(cctx, req, t, l.o.Lease)
		cancel()
		if err == nil {
			if !d.Allowed {
				return nil, d
			}
			t.remote = true
			if t.holdsSlots() {
				l.mu.Lock()
				l.live[t] = struct{}{}
				l.mu.Unlock()
			}
			return t, d
		}
		t.n = 0
		if ctx.Err() == nil { // the client leaving says nothing of Redis
			l.failed("admit", err)
		}
	}
	if l.rs != nil && l.o.FailClosed {
		return nil, Decision{Refused: KindUnavailable, RetryAfter: time.Second}
	}
	d := l.local.admit(req, t)
	if l.rs != nil {
		d.Fallback = true
		l.fallback.Add(1)
	}
	if !d.Allowed {
		return nil, d
	}
	return t, d
}

// failed records a Redis failure: the first one of an outage switches to
// the fallback (or to refusing) until a ping succeeds.
func (l *Limiter) failed(op string, err error) {
	l.countError(op)
	if l.down.CompareAndSwap(false, true) && l.o.OnRedisState != nil {
		l.o.OnRedisState(false, err)
	}
}

func (l *Limiter) countError(op string) {
	for i, o := range redisOps {
		if o == op {
			l.errs[i].Add(1)
		}
	}
	if l.o.OnRedisError != nil {
		l.o.OnRedisError(op)
	}
}

// Start runs the background work: refreshing the concurrency slots of
// running requests, finding Redis again after an outage (and applying the
// settlements it missed), forgetting idle per-instance buckets.
func (l *Limiter) Start() {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		refresh := time.NewTicker(l.o.Lease / 3)
		defer refresh.Stop()
		probe := time.NewTicker(probeEvery)
		defer probe.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-refresh.C:
				l.local.sweep()
				l.budgets.sweep(time.Now())
				if l.rs != nil && !l.down.Load() {
					l.refreshSlots()
				}
			case <-probe.C:
				if l.rs != nil && l.down.Load() {
					l.probe()
				}
			}
		}
	}()
}

// Close stops the background work. Tickets still out settle as usual.
func (l *Limiter) Close() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *Limiter) refreshSlots() {
	l.mu.Lock()
	tickets := make([]*Ticket, 0, len(l.live))
	for t := range l.live {
		tickets = append(tickets, t)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 4*l.o.Timeout)
	defer cancel()
	if err := l.rs.refresh(ctx, tickets, l.o.Lease); err != nil {
		l.failed("refresh", err)
	}
}

// probe pings Redis; when it answers, the Limiter uses Redis again and
// applies the settlements it missed.
func (l *Limiter) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	err := l.rs.client.Ping(ctx).Err()
	cancel()
	if err != nil {
		l.countError("ping")
		return
	}
	if !l.down.CompareAndSwap(true, false) {
		return
	}
	if l.o.OnRedisState != nil {
		l.o.OnRedisState(true, nil)
	}
	l.refreshSlots() // slots that expired during the outage come back
	l.drain()
}

// drain applies the settlements Redis missed, in order; a failure marks
// Redis down again and keeps the rest for the next probe.
func (l *Limiter) drain() {
	l.mu.Lock()
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	for i, p := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
		var err error
		if p.script != nil {
			err = p.script.Run(ctx, l.rs.client, p.keys, p.args...).Err()
		} else {
			err = l.rs.settle(ctx, p.keys, p.args)
		}
		cancel()
		if err != nil {
			l.mu.Lock()
			l.pending = append(pending[i:], l.pending...)
			l.mu.Unlock()
			l.failed("settle", err)
			return
		}
	}
}

// Pending is the number of settlements waiting for Redis to come back.
func (l *Limiter) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// Ticket is an admitted request's hold on its buckets: the tokens it
// reserved and its concurrency slots.
type Ticket struct {
	l       *Limiter
	remote  bool // admitted by Redis
	id      string
	n       int
	b       [MaxBuckets]ticketBucket
	settled atomic.Bool
}

type ticketBucket struct {
	key      string
	tpm      int
	reserved int
	conc     bool
}

func (t *Ticket) add(b Bucket, tokens int) {
	tb := ticketBucket{key: b.Key, conc: b.Limit.Concurrency > 0}
	if b.Limit.TPM > 0 {
		tb.tpm, tb.reserved = b.Limit.TPM, min(tokens, b.Limit.TPM)
	}
	t.b[t.n] = tb
	t.n++
}

func (t *Ticket) holdsSlots() bool {
	for i := 0; i < t.n; i++ {
		if t.b[i].conc {
			return true
		}
	}
	return false
}

// delta is what settling with used tokens adds to the bucket (negative:
// a refund). A negative used keeps the reservation.
func (tb *ticketBucket) delta(used int) int {
	if tb.tpm == 0 || used < 0 {
		return 0
	}
	return used - tb.reserved
}

// Settle ends the request's hold: its token reservation becomes used
// tokens (a refund or an extra charge; negative keeps the reservation) and
// its concurrency slots are freed. Only the first call counts. A settlement
// Redis cannot take now is kept and applied when Redis answers again.
func (t *Ticket) Settle(used int) {
	if t == nil || !t.settled.CompareAndSwap(false, true) {
		return
	}
	l := t.l
	if !t.remote {
		l.local.settle(t, used)
		return
	}
	l.mu.Lock()
	delete(l.live, t)
	l.mu.Unlock()
	keys, args := l.rs.settleArgs(t, used)
	if !l.down.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
		err := l.rs.settle(ctx, keys, args)
		cancel()
		if err == nil {
			return
		}
		l.failed("settle", err)
	}
	l.mu.Lock()
	if len(l.pending) >= maxPending {
		l.pending = l.pending[1:]
	}
	l.pending = append(l.pending, pendingSettle{keys: keys, args: args})
	l.mu.Unlock()
}

// Load reports, for tests and tools, a bucket's requests in flight and
// tokens charged and not yet refilled, in Redis (or the per-instance state
// without it).
func (l *Limiter) Load(ctx context.Context, b Bucket) (inFlight int, tokens float64, err error) {
	if l.rs != nil {
		return l.rs.load(ctx, b)
	}
	l.local.mu.Lock()
	defer l.local.mu.Unlock()
	lb := l.local.buckets[b.Key]
	if lb == nil {
		return 0, 0, nil
	}
	if b.Limit.TPM > 0 {
		now := micros(l.local.now())
		tokens = max(0, (lb.t-now)*float64(b.Limit.TPM)/windowUS)
	}
	return lb.conc, tokens, nil
}

// IsUnavailable reports whether d refused because the shared store is
// unreachable (fail closed).
func IsUnavailable(d Decision) bool { return d.Refused == KindUnavailable }
