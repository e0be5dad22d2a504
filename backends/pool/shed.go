package pool

import "github.com/llmedge/llmedge/api"

// DefaultShedKV is the KV-cache usage from which a replica's engine counts
// as saturated for sheddable work: a new request would wait for memory,
// or preempt another.
const DefaultShedKV = 0.95

// Saturated reports whether the pool is saturated for sheddable work: a
// request waits in the queue, or the slots free on the replicas whose
// engines are not saturated (a queue of their own, a KV cache nearly
// full, as scraped) number no more than the pool's reserve. A usable
// replica without a cap whose engine is not saturated leaves the pool
// unsaturated: nothing says it cannot take more.
func (p *Pool) Saturated() bool {
	return p.saturated(false)
}

// saturated is Saturated, judged as SpareBelow with below.
func (p *Pool) saturated(below bool) bool {
	if p.waiting.Load() > 0 {
		return true
	}
	s := p.spare(below)
	return s.Usable && !s.Open && s.Free <= p.opts.Reserve
}

// Spare is what the pool's usable replicas (healthy, breaker not open)
// could take beside their work now, as Saturated judges it.
type Spare struct {
	// Usable: some replica is usable.
	Usable bool
	// Open: a usable replica without a cap has an engine that is not
	// saturated: nothing says it cannot take more.
	Open bool
	// Free counts the free slots of the capped usable replicas whose
	// engines are not saturated; Slots the slots of every capped usable
	// replica.
	Free, Slots int
}

// Spare reports the pool's spare capacity (see Spare).
func (p *Pool) Spare() Spare { return p.spare(false) }

// SpareBelow is Spare for more work of the lowest class on engines that
// order their queue by class (engine priority), batch lines: such an
// engine whose queue holds no more requests than the gateway had of that
// class on it when its figures were read is full, but what waits there is
// that work, which runs after anything better, so the engine is not
// saturated for it. A queue longer than that holds a better request,
// which is saturation as for Spare; so is a KV cache at least shed_kv
// full. Filling such an engine to the brim keeps a line ready for every
// sequence online work leaves, where closing at its first queued line
// would leave them idle until the next figures.
func (p *Pool) SpareBelow() Spare { return p.spare(true) }

func (p *Pool) spare(below bool) Spare {
	kv := p.opts.ShedKV
	if kv <= 0 {
		kv = DefaultShedKV
	}
	var s Spare
	for _, r := range p.Replicas() {
		if !r.Healthy() || r.breakerOpen() {
			continue
		}
		s.Usable = true
		if r.MaxConcurrency > 0 {
			s.Slots += r.MaxConcurrency
		}
		if r.engineSaturated(kv, below) {
			continue
		}
		if r.MaxConcurrency <= 0 {
			s.Open = true
			continue
		}
		if n := r.MaxConcurrency - int(r.outstanding.Load()); n > 0 {
			s.Free += n
		}
	}
	return s
}

// engineSaturated reports whether r's engine, by its fresh figures, has
// requests waiting (beyond the batch it runs) or its KV cache at least kv
// full. With below, the requests waiting may be as many as the gateway's
// sheddable ones on r when the figures were read (see SpareBelow).
func (r *Replica) engineSaturated(kv float64, below bool) bool {
	l, ok := r.EngineLoad()
	if !ok {
		return false
	}
	queued := l.Waiting >= 1
	if below {
		queued = l.Waiting > l.OwnSheddable
	}
	return queued || (l.KVUsage >= 0 && l.KVUsage >= kv)
}

// sheds reports whether req is to be refused at once (ErrShed).
func (p *Pool) sheds(req *Request) bool {
	return req.Priority <= api.PrioritySheddable && (!p.opts.NoShed || req.NoWait) &&
		p.saturated(req.NoWait && req.EngineByClass)
}

// Reserve is the number of slots kept from sheddable requests.
func (p *Pool) Reserve() int { return p.opts.Reserve }

// Sheds reports whether the pool refuses sheddable requests when
// saturated (rather than queue them last).
func (p *Pool) Sheds() bool { return !p.opts.NoShed }

// WaitingByClass is the number of requests in the wait queue of each
// class, in the order of api.Priorities (critical first).
func (p *Pool) WaitingByClass() [3]int {
	p.queue.mu.Lock()
	defer p.queue.mu.Unlock()
	return p.queue.byClass
}
