package pool

import (
	"sync/atomic"
	"time"

	"github.com/llmedge/llmedge/api"
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
	// Own is how many of the gateway's own requests were outstanding on
	// the replica when the figures were read: the engine counts them too.
	Own float64
	// OwnSheddable is how many of those were of the lowest class.
	OwnSheddable float64
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
// outstanding requests, always current, plus what a fresh engine figure
// says beyond the gateway's own requests at the time it was read — the
// requests that came another way (another gateway instance, another
// client). An engine figure is seconds old; taken as it stands, it would
// count the gateway's requests that have finished since, and keep a
// replica that just served a conversation from serving its next turn.
// Without a fresh figure, the gateway's count stands alone.
func (r *Replica) Load() float64 {
	n := float64(r.outstanding.Load())
	if l := r.engine.Load(); l != nil && time.Now().Before(l.Until) {
		if other := l.Running + l.Waiting - l.Own; other > 0 {
			n += other
		}
	}
	return n / float64(r.weight())
}

// LoadFor is Load as req sees it. On engines that order their queue by
// class (req.EngineByClass), a request above the lowest class overtakes
// the gateway's sheddable requests there (the engine runs it first and
// preempts one of them for it): they are no load for it. So online
// requests spread by the online work on each replica, however the batch
// lines that fill the rest are placed.
func (r *Replica) LoadFor(req *Request) float64 {
	if !overtakes(req) {
		return r.Load()
	}
	return r.Load() - float64(r.sheddable.Load())/float64(r.weight())
}

// PendingPrefillFor is PendingPrefill as req sees it: without the
// sheddable requests' prefill when req overtakes them (see LoadFor).
func (r *Replica) PendingPrefillFor(req *Request) int64 {
	if !overtakes(req) {
		return r.PendingPrefill()
	}
	return r.PendingPrefill() - r.pendingSheddable.Load()
}

// overtakes reports whether req runs before the sheddable requests on
// its replicas' engines.
func overtakes(req *Request) bool {
	return req != nil && req.EngineByClass && req.Priority > api.PrioritySheddable
}

// PendingPrefill is the prefill work of the requests sent to r that have
// not had their first token yet, as the policies that chose r predicted it
// (Choice.Prefill): the queue of prompt processing ahead of a new request.
// It counts this instance's requests and what the other gateway instances
// last said they had queued there (SetPeerPrefill): a replica's prefill
// lane is one, whichever instance fills it.
func (r *Replica) PendingPrefill() int64 { return r.pending.Load() + r.peer.Load() }

// OwnPrefill is the part of PendingPrefill this instance sent: what it
// tells the other instances.
func (r *Replica) OwnPrefill() int64 { return r.pending.Load() }

// OnPendingChange sets f to be called, on the request path, whenever
// OwnPrefill changes (nil: nothing is called): the sharing of queues tells
// the other instances at once rather than at its next flush. f must not
// block.
func (r *Replica) OnPendingChange(f func()) {
	if f == nil {
		r.onPending.Store(nil)
		return
	}
	r.onPending.Store(&f)
}

func (r *Replica) pendingChanged() {
	if f := r.onPending.Load(); f != nil {
		(*f)()
	}
}

// SetPeerPrefill records the prefill the other gateway instances have
// queued on r, as they last told (off the request path); 0 forgets it.
func (r *Replica) SetPeerPrefill(n int64) { r.peer.Store(max(n, 0)) }

// Saturated reports whether r's engine says its KV cache is at least
// kvFull used: a new request would wait for memory or preempt another.
func (r *Replica) Saturated(kvFull float64) bool {
	l, ok := r.EngineLoad()
	return ok && l.KVUsage >= 0 && kvFull > 0 && l.KVUsage >= kvFull
}
