package pool

import (
	"sync/atomic"
	"time"
)

// EngineLoad is a replica's load as its engine reports it (read from its
// own metrics, off the request path).
type EngineLoad struct {
	// Running and Waiting are the engine's requests in its batch and in
	// its queue.
	Running, Waiting float64
	// KVUsage is the share (0..1) of its KV cache in use; negative when the
	// engine does not report it.
	KVUsage float64
	// At is when the figures were read; Until is when they stop counting.
	At, Until time.Time
}

// engineLoad holds the latest figures; nil when none are known.
type engineLoad = atomic.Pointer[EngineLoad]

// SetEngineLoad records the engine's figures; they count until l.Until.
func (r *Replica) SetEngineLoad(l EngineLoad) { r.engine.Store(&l) }

// ClearEngineLoad forgets the engine's figures (they turned unusable).
func (r *Replica) ClearEngineLoad() { r.engine.Store(nil) }

// EngineLoad returns the engine's figures and whether they are fresh.
func (r *Replica) EngineLoad() (EngineLoad, bool) {
	l := r.engine.Load()
	if l == nil || time.Now().After(l.Until) {
		return EngineLoad{}, false
	}
	return *l, true
}

// Load is the work r has in hand, per unit of weight: the gateway's own
// outstanding requests, or the engine's running and waiting requests when
// a fresh figure says more (it also sees requests that came another way,
// e.g. through another gateway instance). The gateway's count stands in
// whenever the engine's figure is unknown or stale.
func (r *Replica) Load() float64 {
	n := float64(r.outstanding.Load())
	if l := r.engine.Load(); l != nil && l.Running+l.Waiting > n && time.Now().Before(l.Until) {
		n = l.Running + l.Waiting
	}
	return n / float64(r.weight())
}

// Saturated reports whether r's engine says its KV cache is at least
// kvFull used: a new request would wait for memory or preempt another.
func (r *Replica) Saturated(kvFull float64) bool {
	l, ok := r.EngineLoad()
	return ok && l.KVUsage >= 0 && kvFull > 0 && l.KVUsage >= kvFull
}
