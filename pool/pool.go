package pool

import (
	"errors"
	"sync/atomic"
)

// Errors from Acquire.
var (
	// ErrNoReplicas: the pool has no usable replica (none known, or every
	// one excluded by the caller).
	ErrNoReplicas = errors.New("no healthy replica")
	// ErrSaturated: every usable replica is at its concurrency cap.
	ErrSaturated = errors.New("every replica is at its concurrency limit")
)

// Pool is the replica set of one model type.
type Pool struct {
	name     string
	policy   Policy
	replicas atomic.Pointer[[]*Replica]
}

// New returns an empty pool that picks with policy.
func New(name string, policy Policy) *Pool {
	p := &Pool{name: name, policy: policy}
	p.replicas.Store(&[]*Replica{})
	return p
}

// Name is the model type the pool serves.
func (p *Pool) Name() string { return p.name }

// Replicas returns the current set; callers must not modify it.
func (p *Pool) Replicas() []*Replica { return *p.replicas.Load() }

// Set replaces the replica set. A replica whose settings did not change
// keeps its object, so its outstanding count stays true across updates.
func (p *Pool) Set(next []*Replica) {
	old := make(map[string]*Replica, len(p.Replicas()))
	for _, r := range p.Replicas() {
		old[r.URL] = r
	}
	merged := make([]*Replica, len(next))
	for i, r := range next {
		if o, ok := old[r.URL]; ok && sameConfig(o, r) {
			merged[i] = o
		} else {
			merged[i] = r
		}
	}
	p.replicas.Store(&merged)
}

// Acquire picks a replica not in exclude and takes a slot on it; the
// caller must Release it. exclude holds replicas already tried for this
// request.
func (p *Pool) Acquire(exclude []*Replica) (*Replica, error) {
	all := p.Replicas()
	var buf [16]*Replica
	candidates := buf[:0]
	sawFull := false
	for _, r := range all {
		switch {
		case excluded(exclude, r), !r.Healthy():
		case r.full():
			sawFull = true
		default:
			candidates = append(candidates, r)
		}
	}
	for len(candidates) > 0 {
		r := p.policy.Choose(candidates)
		if r.tryAcquire() {
			return r, nil
		}
		// Lost a race for the last slot; try the others.
		sawFull = true
		candidates = remove(candidates, r)
	}
	if sawFull {
		return nil, ErrSaturated
	}
	return nil, ErrNoReplicas
}

func excluded(list []*Replica, r *Replica) bool {
	for _, x := range list {
		if x == r {
			return true
		}
	}
	return false
}

func remove(list []*Replica, r *Replica) []*Replica {
	for i, x := range list {
		if x == r {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}
