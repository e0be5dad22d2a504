package pool

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llmedge/llmedge/api"
)

// QueueOrder is the order in which waiting requests get the slots that
// free up.
type QueueOrder uint8

const (
	// OrderFair serves waiting tenants in turn, weighted by the work each
	// has been served (a virtual token counter, as in VTC): the waiter
	// whose tenant has the smallest counter goes next. A tenant with many
	// requests waiting cannot starve one with a few.
	OrderFair QueueOrder = iota
	// OrderFIFO serves waiters in arrival order, whoever they are.
	OrderFIFO
)

func (o QueueOrder) String() string {
	if o == OrderFIFO {
		return "fifo"
	}
	return "fair"
}

// ParseQueueOrder reads "fair" or "fifo".
func ParseQueueOrder(s string) (QueueOrder, error) {
	switch s {
	case "", "fair":
		return OrderFair, nil
	case "fifo":
		return OrderFIFO, nil
	}
	return OrderFair, fmt.Errorf("queue order %q: want fair or fifo", s)
}

// waitQueue holds the requests waiting for a slot. Slots are handed over,
// not raced for: when one frees, the releaser gives it to the next waiter
// in order, and while anyone waits newcomers queue too, so the order is
// the one the queue decides.
//
// Fairness (OrderFair) follows the virtual token counter: each tenant has
// a counter that grows with the tokens it is served — its prompt's
// estimate when a request of its leaves the queue, its completion when the
// request ends. The waiter of the tenant with the smallest counter goes
// next; on a tie, the tenant with fewer requests waiting (one just lifted
// to the others' level goes before a backlog), then the older request. A
// tenant that arrives after idling starts at
// the smallest counter of the tenants waiting, not at its old figure (it
// would jump ahead for as long as its absence lasted) nor at zero. The
// counters matter only while requests wait: they are charged only then,
// and forgotten when the queue empties.
type waitQueue struct {
	mu      sync.Mutex
	order   QueueOrder
	waiters []*waiter
	seq     uint64
	vtc     map[string]float64 // tenant → tokens served while the queue was busy
	queued  map[string]int     // tenant → waiters in the queue
	byClass [3]int             // waiters by class (api.Priority.Index)
}

// waiter is one request in the queue. done is closed once the waiter has
// its answer (a lease or an error) and has left the queue.
type waiter struct {
	req     *Request
	exclude []*Replica
	tenant  string
	share   float64
	prio    api.Priority
	seq     uint64
	done    chan struct{}
	lease   Lease
	err     error
	skipped bool // blocked by its exclusions in this dispatch round
}

// push adds w, lifting an idle tenant's counter to the smallest counter of
// the tenants waiting.
func (q *waitQueue) push(w *waiter) {
	if q.vtc == nil {
		q.vtc, q.queued = map[string]float64{}, map[string]int{}
	}
	q.seq++
	w.seq = q.seq
	if q.queued[w.tenant] == 0 {
		lowest, any := 0.0, false
		for t, n := range q.queued {
			if n > 0 && t != w.tenant && (!any || q.vtc[t] < lowest) {
				lowest, any = q.vtc[t], true
			}
		}
		if any && q.vtc[w.tenant] < lowest {
			q.vtc[w.tenant] = lowest
		}
	}
	q.queued[w.tenant]++
	q.byClass[w.prio.Index()]++
	q.waiters = append(q.waiters, w)
}

// remove takes w out of the queue; when the queue empties, the counters
// are forgotten.
func (q *waitQueue) remove(w *waiter) bool {
	for i, x := range q.waiters {
		if x == w {
			copy(q.waiters[i:], q.waiters[i+1:])
			q.waiters[len(q.waiters)-1] = nil
			q.waiters = q.waiters[:len(q.waiters)-1]
			if q.queued[w.tenant]--; q.queued[w.tenant] <= 0 {
				delete(q.queued, w.tenant)
			}
			q.byClass[w.prio.Index()]--
			if len(q.waiters) == 0 {
				clear(q.vtc)
			}
			return true
		}
	}
	return false
}

// next is the waiter to serve first among those not skipped.
func (q *waitQueue) next() *waiter {
	var best *waiter
	for _, w := range q.waiters {
		if w.skipped {
			continue
		}
		if best == nil || q.before(w, best) {
			best = w
		}
	}
	return best
}

// before orders waiters: a higher class first, whatever the order; within
// a class, fair, by their tenant's counter, then (a tenant just lifted to
// the others' level) the tenant with fewer waiting, then by arrival; fifo,
// by arrival.
func (q *waitQueue) before(a, b *waiter) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if q.order == OrderFair && a.tenant != b.tenant {
		if va, vb := q.vtc[a.tenant], q.vtc[b.tenant]; va != vb {
			return va < vb
		}
		if na, nb := q.queued[a.tenant], q.queued[b.tenant]; na != nb {
			return na < nb
		}
	}
	return a.seq < b.seq
}

// charge adds tokens to tenant's counter, while requests wait.
func (q *waitQueue) charge(tenant string, tokens float64) {
	if len(q.waiters) > 0 && tokens > 0 {
		q.vtc[tenant] += tokens
	}
}

// promptTokens is a cheap estimate of a request's prompt tokens for the
// counters: what matters is the tenants' relative use.
func promptTokens(req *Request) float64 {
	n := 0
	for i := range req.Messages {
		n += req.Messages[i].Size() + 16
	}
	return float64(n) / 4
}

// AcquireWait is Acquire, but when every usable replica is at its cap it
// waits in the pool's bounded queue for a slot, until the queue timeout
// (less what req already waited) or ctx ends. While requests wait,
// newcomers wait behind them, and freed slots go to waiters in the queue's
// order: by class, then Options.QueueOrder. A sheddable request does not
// wait: while the pool is saturated it is refused at once (ErrShed).
func (p *Pool) AcquireWait(ctx context.Context, req *Request, exclude []*Replica) (Lease, error) {
	if req == nil {
		req = &Request{Model: p.name}
	}
	if p.sheds(req) {
		return Lease{}, ErrShed
	}
	limit := p.opts.QueueTimeout - req.Waited
	queue := p.opts.QueueLength > 0 && p.opts.QueueTimeout > 0 && !req.NoWait
	if !queue || p.waiting.Load() == 0 {
		l, err := p.Acquire(req, exclude)
		if err != ErrSaturated || !queue {
			l.tenant, l.share = tenantOf(req), shareOf(req)
			return l, err
		}
	}
	if limit <= 0 {
		return Lease{}, ErrQueueTimeout // its earlier attempts used its time
	}
	w := &waiter{req: req, exclude: exclude, tenant: tenantOf(req), share: shareOf(req), prio: req.Priority,
		done: make(chan struct{})}
	q := &p.queue
	q.mu.Lock()
	if len(q.waiters) >= p.opts.QueueLength {
		q.mu.Unlock()
		return Lease{}, ErrQueueFull
	}
	q.push(w)
	p.waiting.Add(1)
	p.dispatchLocked() // a slot may have freed since Acquire; or w is first
	q.mu.Unlock()

	timer := time.NewTimer(limit)
	defer timer.Stop()
	var cause error
	select {
	case <-w.done:
		return w.lease, w.err
	case <-timer.C:
		cause = ErrQueueTimeout
	case <-ctx.Done():
		cause = ctx.Err()
	}
	q.mu.Lock()
	if q.remove(w) {
		p.waiting.Add(-1)
		q.mu.Unlock()
		return Lease{}, cause
	}
	q.mu.Unlock()
	<-w.done // served at the very moment it gave up
	if w.err == nil && ctx.Err() != nil {
		w.lease.Release(Excluded) // nobody to serve
		return Lease{}, ctx.Err()
	}
	return w.lease, w.err
}

func tenantOf(req *Request) string { return req.User }

// shareOf is the request's tenant's weight in the fair queue (1 unless
// set).
func shareOf(req *Request) float64 {
	if req.Share > 0 {
		return req.Share
	}
	return 1
}

// dispatchLocked hands freed slots to waiters, in order, for as long as
// they get one. A waiter that cannot get a slot only because of the
// replicas it already tried is passed over for this round; one without
// exclusions that cannot get a slot means nobody can.
func (p *Pool) dispatchLocked() {
	q := &p.queue
	defer func() {
		for _, w := range q.waiters {
			w.skipped = false
		}
	}()
	for {
		w := q.next()
		if w == nil {
			return
		}
		l, err := p.Acquire(w.req, w.exclude)
		if err == ErrSaturated {
			if len(w.exclude) == 0 {
				return
			}
			w.skipped = true
			continue
		}
		q.charge(w.tenant, promptTokens(w.req)/w.share)
		q.remove(w)
		p.waiting.Add(-1)
		l.tenant, l.share = w.tenant, w.share
		w.lease, w.err = l, err
		close(w.done)
	}
}

// signal hands the slots that may have freed to the waiters.
func (p *Pool) signal() {
	if p.waiting.Load() == 0 {
		return
	}
	p.queue.mu.Lock()
	p.dispatchLocked()
	p.queue.mu.Unlock()
}

// Charge adds tokens served (the completion, when the request ends) to
// the lease's tenant in the queue's counters; it matters only while
// requests wait.
func (l *Lease) Charge(tokens int) {
	p := l.pool
	if p == nil || tokens <= 0 || p.waiting.Load() == 0 {
		return
	}
	p.queue.mu.Lock()
	share := l.share
	if share <= 0 {
		share = 1
	}
	p.queue.charge(l.tenant, float64(tokens)/share)
	p.queue.mu.Unlock()
}

// QueueOrder is the order of the pool's wait queue.
func (p *Pool) QueueOrder() QueueOrder { return p.opts.QueueOrder }
