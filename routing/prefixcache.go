package routing

import (
	"math/rand/v2"
	"sync"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/routing/prefix"
)

// Defaults of PrefixCache.
const (
	// DefaultLoadFactor lets a replica take up to twice the mean load
	// before it is left out, whatever its cache holds. A tighter bound
	// diverts cached requests into cold prefills elsewhere whenever the
	// replicas' in-flight counts fluctuate, and a request that is only
	// decoding costs a newcomer little (the routing benchmark measured
	// p90 time to first token three times lower at 2 than at 1.25).
	DefaultLoadFactor = 2.0
	// DefaultKVFull is the KV-cache usage at which an engine is saturated:
	// new requests would wait for memory or preempt others.
	DefaultKVFull = 0.95
)

// PrefixCache sends a request where its first token is expected soonest:
// the replica minimising the prefill work queued there (the uncached
// prompt blocks of the requests sent to it that have no first token yet)
// plus this prompt's own uncached blocks on it. A replica holding the
// prompt's prefix needs little prefill, so a conversation's next turn and
// a tenant's system prompt go back where they are cached; a cold prompt
// goes where the least prefill is queued, rather than where the fewest
// requests are (those may all be long decodes); and a popular prefix
// spreads once its replica's queue costs more than a cold start elsewhere.
// Ties go to the least loaded replica.
//
// Replicas whose load is above LoadFactor times the mean (plus one
// request) are left out while others are not, so no replica is buried
// under one prefix; neither are replicas whose engine reports its KV cache
// at least KVFull used. Load is pool.Replica.Load: the gateway's own
// outstanding requests plus what the engine reports beyond them; for a
// request that overtakes the sheddable ones in the engine (engines
// ordering by class), load and queued prefill leave those out
// (Replica.LoadFor, PendingPrefillFor).
//
// Each decision is recorded in the Index, so a conversation's next turn
// finds its history where it went. Prompts are hashed within the
// request's cache partition (pool.Request.Partition): a prompt matches only
// its own partition's, so neither the choice nor its Cached share tells a
// tenant anything of another's prompts.
type PrefixCache struct {
	Index *prefix.Index
	// LoadFactor bounds a replica's load relative to the mean; 0 means
	// DefaultLoadFactor.
	LoadFactor float64
	// KVFull is the KV-cache usage (0..1) at which a replica counts as
	// saturated; 0 means DefaultKVFull.
	KVFull float64
	// Share, when set, tells the other gateway instances every decision
	// (share.Model): off the request path, a copy and a channel send.
	Share Sharer
}

// Sharer passes a model's routing decisions to the other gateway
// instances, which apply them to their own index (package share).
type Sharer interface {
	// Publish queues the decision that the prompt of hashes went to
	// replica; it must not block, nor keep hashes.
	Publish(replica string, hashes []uint64)
	// SetQueues says which replicas the model has now; the Sharer tells
	// the other instances their OwnPrefill and records the others' in
	// them (SetPeerPrefill), so that PendingPrefill counts every
	// instance's requests.
	SetQueues(rs []*pool.Replica)
}

// scratch holds one decision's buffers, reused across requests.
type scratch struct {
	hashes  []uint64
	names   []string
	matched []int
	loads   []float64
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// Select implements pool.Policy.
func (p *PrefixCache) Select(req *pool.Request, c []*pool.Replica) pool.Choice {
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)
	s.hashes = p.Index.HashIn(s.hashes[:0], req.Partition, req.Messages)
	s.names, s.loads = s.names[:0], s.loads[:0]
	var sum float64
	for _, r := range c {
		l := r.LoadFor(req)
		s.names, s.loads = append(s.names, r.URL), append(s.loads, l)
		sum += l
	}
	s.matched = p.Index.Match(s.matched[:0], s.hashes, s.names)

	// Which candidates may be chosen: within the load bound and not
	// saturated, unless that leaves none.
	bound := p.loadFactor() * (sum + 1) / float64(len(c))
	kvFull := p.kvFull()
	eligible := func(i int, strict bool) bool {
		return !strict || (s.loads[i] <= bound && !c[i].Saturated(kvFull))
	}
	strict := false
	for i := range c {
		if eligible(i, true) {
			strict = true
			break
		}
	}
	total := int64(len(s.hashes))
	best, ties := -1, 0
	var bestCost int64
	for i, r := range c {
		if !eligible(i, strict) {
			continue
		}
		cost := r.PendingPrefillFor(req) + total - int64(s.matched[i])
		switch {
		case best < 0 || cost < bestCost || (cost == bestCost && s.loads[i] < s.loads[best]):
			best, bestCost, ties = i, cost, 1
		case cost == bestCost && s.loads[i] == s.loads[best]:
			ties++ // an even draw among equals
			if rand.IntN(ties) == 0 {
				best = i
			}
		}
	}
	chosen := c[best]
	reason := pool.ReasonPrefix
	switch {
	case len(c) == 1:
		reason = pool.ReasonOnly
	case s.matched[best] == 0:
		reason = pool.ReasonLoad
	}
	cached := 0.0
	if total > 0 {
		cached = float64(s.matched[best]) / float64(total)
	}
	// An index full of replicas refuses a new one; the request is routed
	// all the same, only not remembered.
	_, _ = p.Index.Insert(chosen.URL, s.hashes)
	if p.Share != nil {
		p.Share.Publish(chosen.URL, s.hashes)
	}
	return pool.Choice{Replica: chosen, Reason: reason, Cached: cached, Prefill: total - int64(s.matched[best])}
}

// Record implements Recorder: a request placed by another rule (session
// affinity) is remembered where it went.
func (p *PrefixCache) Record(req *pool.Request, r *pool.Replica) float64 {
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)
	s.hashes = p.Index.HashIn(s.hashes[:0], req.Partition, req.Messages)
	hit, _ := p.Index.Insert(r.URL, s.hashes)
	if p.Share != nil {
		p.Share.Publish(r.URL, s.hashes)
	}
	if len(s.hashes) == 0 {
		return 0
	}
	return float64(hit) / float64(len(s.hashes))
}

// ReplicasChanged implements pool.ReplicaWatcher: replicas that left the
// pool are forgotten, so their slots serve the ones that came.
func (p *PrefixCache) ReplicasChanged(current []*pool.Replica) {
	keep := make(map[string]bool, len(current))
	for _, r := range current {
		keep[r.URL] = true
	}
	if p.Share != nil {
		p.Share.SetQueues(current)
	}
	for _, rs := range p.Index.Stats().Replicas {
		if !keep[rs.Replica] {
			p.Index.Remove(rs.Replica)
		}
	}
}

func (p *PrefixCache) loadFactor() float64 {
	if p.LoadFactor <= 0 {
		return DefaultLoadFactor
	}
	return p.LoadFactor
}

func (p *PrefixCache) kvFull() float64 {
	if p.KVFull <= 0 {
		return DefaultKVFull
	}
	return p.KVFull
}

var (
	_ Recorder            = (*PrefixCache)(nil)
	_ pool.Policy         = (*PrefixCache)(nil)
	_ pool.ReplicaWatcher = (*PrefixCache)(nil)
)
