package pool

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
)

// Policy chooses one replica among candidates, all of which are usable
// (not excluded, below their cap). candidates is never empty.
type Policy interface {
	Choose(candidates []*Replica) *Replica
}

// Policy names accepted by NewPolicy.
const (
	PolicyP2C           = "p2c"
	PolicyRoundRobin    = "round_robin"
	PolicyRandom        = "random"
	PolicyLeastRequests = "least_requests"
)

// Policies lists the accepted policy names.
var Policies = []string{PolicyP2C, PolicyRoundRobin, PolicyRandom, PolicyLeastRequests}

// NewPolicy returns the named policy; "" is p2c.
func NewPolicy(name string) (Policy, error) {
	switch name {
	case "", PolicyP2C:
		return P2C{}, nil
	case PolicyRoundRobin:
		return &RoundRobin{}, nil
	case PolicyRandom:
		return Random{}, nil
	case PolicyLeastRequests:
		return LeastRequests{}, nil
	}
	return nil, fmt.Errorf("unknown lb_policy %q (want one of %v)", name, Policies)
}

// P2C samples two replicas by weight and takes the one with fewer
// outstanding requests per unit of weight: near least-loaded balancing
// without scanning, and without the herd effect of a strict minimum.
type P2C struct{}

func (P2C) Choose(c []*Replica) *Replica {
	if len(c) == 1 {
		return c[0]
	}
	a := weightedPick(c, nil)
	b := weightedPick(c, a)
	if load(b) < load(a) {
		return b
	}
	return a
}

// RoundRobin cycles through the replicas, weighted by repetition of turns.
type RoundRobin struct{ n atomic.Uint64 }

func (rr *RoundRobin) Choose(c []*Replica) *Replica {
	var total int64
	for _, r := range c {
		total += r.weight()
	}
	k := int64(rr.n.Add(1)-1) % total
	for _, r := range c {
		if k -= r.weight(); k < 0 {
			return r
		}
	}
	return c[len(c)-1]
}

// Random picks by weight.
type Random struct{}

func (Random) Choose(c []*Replica) *Replica { return weightedPick(c, nil) }

// LeastRequests takes the replica with the fewest outstanding requests per
// unit of weight, ties broken at random.
type LeastRequests struct{}

func (LeastRequests) Choose(c []*Replica) *Replica {
	var best *Replica
	var bestLoad float64
	ties := 0
	for _, r := range c {
		l := load(r)
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

func load(r *Replica) float64 { return float64(r.Outstanding()) / float64(r.weight()) }

// weightedPick draws one replica other than skip, with probability
// proportional to weight.
func weightedPick(c []*Replica, skip *Replica) *Replica {
	var total int64
	for _, r := range c {
		if r != skip {
			total += r.weight()
		}
	}
	k := rand.Int64N(total)
	for _, r := range c {
		if r == skip {
			continue
		}
		if k -= r.weight(); k < 0 {
			return r
		}
	}
	return c[len(c)-1]
}
