package pool

import "slices"

// Usable filters replicas down to those a request could go to now:
// healthy, breaker not open, below their concurrency cap, not in exclude.
func Usable(replicas, exclude []*Replica) []*Replica {
	out := make([]*Replica, 0, len(replicas))
	for _, r := range replicas {
		if r.Healthy() && !r.breakerOpen() && !slices.Contains(exclude, r) {
			out = append(out, r)
		}
	}
	return out
}

// Full reports whether r is at its concurrency cap.
func (r *Replica) Full() bool { return r.full() }
