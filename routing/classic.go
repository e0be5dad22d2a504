package routing

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/llmedge/llmedge/backends/pool"
)

// P2C samples two replicas by weight and takes the one with less load per
// unit of weight: near least-loaded balancing without scanning, and
// without the herd effect of a strict minimum.
type P2C struct{}

// Select implements pool.Policy.
func (P2C) Select(req *pool.Request, c []*pool.Replica) pool.Choice {
	if len(c) == 1 {
		return pool.Pick(c[0], pool.ReasonOnly)
	}
	a := weightedPick(c, nil)
	b := weightedPick(c, a)
	if b.LoadFor(req) < a.LoadFor(req) {
		a = b
	}
	return pool.Pick(a, pool.ReasonLoad)
}

// RoundRobin cycles through the replicas, weighted by repetition of turns.
type RoundRobin struct{ n atomic.Uint64 }

// Select implements pool.Policy.
func (rr *RoundRobin) Select(_ *pool.Request, c []*pool.Replica) pool.Choice {
	var total int64
	for _, r := range c {
		total += r.EffectiveWeight()
	}
	k := int64(rr.n.Add(1)-1) % total
	for _, r := range c {
		if k -= r.EffectiveWeight(); k < 0 {
			return pool.Pick(r, pool.ReasonRoundRobin)
		}
	}
	return pool.Pick(c[len(c)-1], pool.ReasonRoundRobin)
}

// Random picks by weight.
type Random struct{}

// Select implements pool.Policy.
func (Random) Select(_ *pool.Request, c []*pool.Replica) pool.Choice {
	return pool.Pick(weightedPick(c, nil), pool.ReasonRandom)
}

// LeastRequests takes the replica with the least load per unit of weight,
// ties broken at random.
type LeastRequests struct{}

// Select implements pool.Policy.
func (LeastRequests) Select(req *pool.Request, c []*pool.Replica) pool.Choice {
	return pool.Pick(leastLoaded(req, c), pool.ReasonLoad)
}

// leastLoaded returns the replica with the least load per unit of weight,
// ties broken at random.
func leastLoaded(req *pool.Request, c []*pool.Replica) *pool.Replica {
	var best *pool.Replica
	var bestLoad float64
	ties := 0
	for _, r := range c {
		l := r.LoadFor(req)
		switch {
		case best == nil || l < bestLoad:
			best, bestLoad, ties = r, l, 1
		case l == bestLoad:
			ties++
			if rand.IntN(ties) == 0 {
				best = r
			}
		}
	}
	return best
}

// weightedPick draws one replica other than skip, with probability
// proportional to weight.
func weightedPick(c []*pool.Replica, skip *pool.Replica) *pool.Replica {
	var total int64
	for _, r := range c {
		if r != skip {
			total += r.EffectiveWeight()
		}
	}
	k := rand.Int64N(total)
	for _, r := range c {
		if r == skip {
			continue
		}
		if k -= r.EffectiveWeight(); k < 0 {
			return r
		}
	}
	return c[len(c)-1]
}

// Interface guards.
var (
	_ pool.Policy = P2C{}
	_ pool.Policy = (*RoundRobin)(nil)
	_ pool.Policy = Random{}
	_ pool.Policy = LeastRequests{}
)
