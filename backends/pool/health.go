package pool

// Healthy reports whether r is usable as far as active health probing
// knows; a replica is healthy until a probe says otherwise. Acquire skips
// unhealthy replicas.
func (r *Replica) Healthy() bool { return !r.unhealthy.Load() }

// SetHealthy records the outcome of a health probe.
func (r *Replica) SetHealthy(ok bool) { r.unhealthy.Store(!ok) }
