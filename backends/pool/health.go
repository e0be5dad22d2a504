package pool

// Healthy reports whether r is usable as far as active health probing
// knows; a replica is healthy until a probe says otherwise. Acquire skips
// unhealthy replicas.
func (r *Replica) Healthy() bool { return !r.unhealthy.Load() }

// SetHealthy records the outcome of a health probe.
func (r *Replica) SetHealthy(ok bool) { r.unhealthy.Store(!ok) }

// Readmit tells the pool that r is back after a health probe saw it down
// (a restart): its circuit breaker is closed at once rather than after its
// open timeout, unless the breaker opened again soon after the last
// readmission (see breaker.readmit). It reports whether an open or
// half-open breaker was closed. A replica ejected as slow stays ejected:
// slowness is no failure a restart is known to cure.
func (r *Replica) Readmit() bool {
	b := r.breaker.Load()
	return b != nil && b.readmit()
}
