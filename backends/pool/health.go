package pool

// Healthy reports whether r is usable as far as active health probing
// knows; a replica is healthy until a probe says otherwise. Acquire skips
// unhealthy replicas.
func (r *Replica) Healthy() bool { return !r.unhealthy.Load() }

// SetHealthy records the outcome of a health probe.
func (r *Replica) SetHealthy(ok bool) { r.unhealthy.Store(!ok) }

// Readmit tells the pool that r is back: a health probe passes after
// one failed (a restart), or after a request found r unreachable
// (Unreachable: a process restarted faster than the probes could see).
// Its circuit breaker is closed at once rather than after its open
// timeout, unless it opened again soon after the last readmission (see
// breaker.readmit). It reports whether an open or half-open breaker was
// closed. A replica ejected as slow stays ejected: slowness is not a
// failure a restart is known to cure, and its ejection has its own
// cool-down and probing.
func (r *Replica) Readmit() bool {
	b := r.breaker.Load()
	return b != nil && b.readmit()
}

// Unreachable reports whether a request found r unreachable since it last
// answered one, or was readmitted.
func (r *Replica) Unreachable() bool {
	b := r.breaker.Load()
	return b != nil && b.unreachable.Load()
}
