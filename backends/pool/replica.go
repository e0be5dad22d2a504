// Package pool keeps the set of replicas serving one model type and picks
// one for each request. The set is swapped atomically, so the request path
// never waits on discovery.
package pool

import (
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
)

// Replica is one inference server. Its counters are shared by every request
// routed to it; configuration fields are read-only once it is in a Pool.
type Replica struct {
	// URL is the replica's base address, without a trailing slash.
	URL string
	// Model, when set, overrides the upstream model name of the pool.
	Model string
	// Protocol, when set, overrides the protocol of the pool.
	Protocol string
	// Weight scales the replica's share of traffic; 0 means 1.
	Weight int
	// MaxConcurrency caps outstanding requests; 0 means no cap.
	MaxConcurrency int
	// APIKey, when set, overrides the model's key for this replica (e.g.
	// from discovery metadata).
	APIKey string

	outstanding atomic.Int64
	// sheddable counts the outstanding requests of the lowest class
	// (batch lines among them): an engine that orders its queue by class
	// runs them last, so a queue of theirs keeps nobody better waiting.
	sheddable atomic.Int64
	served    atomic.Uint64

	// unhealthy is set by active health probing (see health.go).
	unhealthy atomic.Bool
	// engine holds the engine's own load figures (see load.go).
	engine engineLoad
	// pending is the predicted prefill work before first tokens (load.go),
	// pendingSheddable the part of it of sheddable requests.
	pending, pendingSheddable atomic.Int64
	// peer is the other gateway instances' pending prefill on it (load.go).
	peer atomic.Int64
	// onPending is told when pending changes (load.go); nil for nobody.
	onPending atomic.Pointer[func()]
	// slow is the pool's latest verdict on its latency (slow.go); nil
	// until it has one.
	slow atomic.Pointer[Slowness]

	// breaker is shared by every Replica object of the same model, URL and
	// breaker settings (see Options.Kept); nil when breakers are disabled. Set
	// by Pool.Set; atomic because a replica removed from a set and added
	// back gets it again while old readers may still look.
	breaker  atomic.Pointer[breaker]
	bkey     string
	detached bool // guarded by the owning Pool's setMu
}

// NewReplica parses a base URL ("http://host:port[/prefix]").
func NewReplica(rawURL string) (*Replica, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("replica address %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("replica address %q: want http://host:port or https://host:port", rawURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("replica address %q: no query or fragment allowed", rawURL)
	}
	return &Replica{URL: strings.TrimRight(u.String(), "/")}, nil
}

// Outstanding is the number of requests in flight on r.
func (r *Replica) Outstanding() int64 { return r.outstanding.Load() }

// OutstandingSheddable is the number of r's requests in flight of the
// lowest class (api.PrioritySheddable).
func (r *Replica) OutstandingSheddable() int64 { return r.sheddable.Load() }

// Served is the number of requests r has been given.
func (r *Replica) Served() uint64 { return r.served.Load() }

// EffectiveWeight is r's share of traffic relative to the other replicas
// of its pool: Weight, or 1 when unset.
func (r *Replica) EffectiveWeight() int64 { return r.weight() }

func (r *Replica) weight() int64 {
	if r.Weight <= 0 {
		return 1
	}
	return int64(r.Weight)
}

// BreakerState is the state of r's circuit breaker (closed when r has none).
func (r *Replica) BreakerState() BreakerState {
	b := r.breaker.Load()
	if b == nil {
		return StateClosed
	}
	return b.cb.Load().State()
}

// BreakerCounts are the counts of r's breaker in its current state.
func (r *Replica) BreakerCounts() (requests, successes, failures, excluded uint32) {
	b := r.breaker.Load()
	if b == nil {
		return
	}
	c := b.cb.Load().Counts()
	return c.Requests, c.TotalSuccesses, c.TotalFailures, c.TotalExclusions
}

func (r *Replica) breakerOpen() bool {
	b := r.breaker.Load()
	return b != nil && b.cb.Load().State() == StateOpen
}

// full reports whether r is at its concurrency cap.
func (r *Replica) full() bool {
	return r.MaxConcurrency > 0 && r.outstanding.Load() >= int64(r.MaxConcurrency)
}

// tryAcquire takes a slot on r, failing when r is at its cap.
func (r *Replica) tryAcquire() bool {
	if r.MaxConcurrency <= 0 {
		r.outstanding.Add(1)
		r.served.Add(1)
		return true
	}
	// CAS so the count never shows more than the cap, even transiently.
	for {
		n := r.outstanding.Load()
		if n >= int64(r.MaxConcurrency) {
			return false
		}
		if r.outstanding.CompareAndSwap(n, n+1) {
			r.served.Add(1)
			return true
		}
	}
}

// Release gives back the slot taken when r was acquired from its Pool.
func (r *Replica) Release() { r.outstanding.Add(-1) }

// sameConfig reports whether a and b describe the same replica settings.
func sameConfig(a, b *Replica) bool {
	return a.URL == b.URL && a.Model == b.Model && a.Protocol == b.Protocol &&
		a.Weight == b.Weight && a.MaxConcurrency == b.MaxConcurrency && a.APIKey == b.APIKey
}
