package routing

import (
	"math/rand/v2"
	"sync"

	"github.com/llmedge/llmedge/pool"
	"github.com/llmedge/llmedge/routing/prefix"
)

// Defaults of PrefixCache.
const (
	// DefaultLoadFactor lets a replica that holds the prompt's prefix take
	// up to 1.25 times the mean load before the request goes elsewhere.
	DefaultLoadFactor = 1.25
	// DefaultKVFull is the KV-cache usage at which an engine is saturated:
	// new requests would wait for memory or preempt others.
	DefaultKVFull = 0.95
)

// PrefixCache sends a request to the replica most likely to hold its
// prompt's prefix in its KV cache, with bounded load: the replica with
// the longest cached prefix takes the request unless its load is above
// LoadFactor times the mean load (plus one request, so that an idle pool
// keeps its affinity); then the longest prefix among the replicas within
// the bound wins, and without any cached prefix the least loaded replica.
// Each decision is recorded in the Index, so a conversation's next turn
// finds its history where it went, and a popular prefix spreads over more
// replicas as the bound sends its overflow elsewhere (where it is cached
// from then on) rather than hot-spotting one.
//
// Load is pool.Replica.Load: the engine's running and waiting requests when
// it reports them, else the gateway's own outstanding requests. Replicas
// whose engine reports its KV cache at least KVFull used are avoided while
// others are not.
type PrefixCache struct {
	Index *prefix.Index
	// LoadFactor bounds the load of a replica chosen for its prefix
	// relative to the mean; 0 means DefaultLoadFactor.
	LoadFactor float64
	// KVFull is the KV-cache usage (0..1) at which a replica counts as
	// saturated; 0 means DefaultKVFull.
	KVFull float64
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
	s.hashes = p.Index.Hash(s.hashes[:0], req.Messages)
	s.names, s.loads = s.names[:0], s.loads[:0]
	var sum float64
	for _, r := range c {
		l := r.Load()
		s.names, s.loads = append(s.names, r.URL), append(s.loads, l)
		sum += l
	}
	s.matched = p.Index.Match(s.matched[:0], s.hashes, s.names)

	bound := p.loadFactor() * (sum + 1) / float64(len(c))
	kvFull := p.kvFull()
	anyRoom := false
	for _, r := range c {
		if !r.Saturated(kvFull) {
			anyRoom = true
			break
		}
	}
	best, least := -1, -1
	for i, r := range c {
		if anyRoom && r.Saturated(kvFull) {
			continue
		}
		if least < 0 || s.loads[i] < s.loads[least] || (s.loads[i] == s.loads[least] && rand.IntN(2) == 0) {
			least = i
		}
		if s.loads[i] > bound || s.matched[i] == 0 {
			continue
		}
		if best < 0 || s.matched[i] > s.matched[best] ||
			(s.matched[i] == s.matched[best] && s.loads[i] < s.loads[best]) {
			best = i
		}
	}
	reason := pool.ReasonPrefix
	if best < 0 {
		best, reason = least, pool.ReasonLoad
	}
	if len(c) == 1 {
		reason = pool.ReasonOnly
	}
	chosen := c[best]
	cached := 0.0
	if len(s.hashes) > 0 {
		cached = float64(s.matched[best]) / float64(len(s.hashes))
	}
	// An index full of replicas refuses a new one; the request is routed
	// all the same, only not remembered.
	_, _ = p.Index.Insert(chosen.URL, s.hashes)
	return pool.Choice{Replica: chosen, Reason: reason, Cached: cached}
}

// Record implements Recorder: a request placed by another rule (session
// affinity) is remembered where it went.
func (p *PrefixCache) Record(req *pool.Request, r *pool.Replica) float64 {
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)
	s.hashes = p.Index.Hash(s.hashes[:0], req.Messages)
	hit, _ := p.Index.Insert(r.URL, s.hashes)
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
