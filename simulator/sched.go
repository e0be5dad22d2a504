package simulator

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Scheduling policies (Config.SchedulingPolicy), as vLLM's
// --scheduling-policy names them.
const (
	// SchedulingFCFS admits waiting requests in arrival order and never
	// preempts: vLLM's default.
	SchedulingFCFS = "fcfs"
	// SchedulingPriority admits waiting requests by (priority, arrival),
	// a lower priority value first, and preempts the running sequence
	// last in that order for a waiting one ahead of it when every
	// sequence slot is taken.
	SchedulingPriority = "priority"
)

// scheduler holds the engine's sequence slots (MaxNumSeqs; 0 is no cap)
// and decides who runs, as vLLM's scheduler does with its running and
// waiting queues.
//
// Under fcfs it is a FIFO semaphore. Under priority, requests are ordered
// by the key (priority, arrival) — a lower value first, then the earlier
// arrival, as vLLM's priority request queue orders them — and:
//   - a free slot goes to the waiting request first in that order;
//   - when every slot is taken and the first waiting request is ahead of
//     the last running one (the running request of the largest key, as
//     vLLM picks its victim: max(running, key=(priority, arrival))), that
//     one is preempted: it goes back to waiting with its original key and
//     must recompute its prefill when it resumes (vLLM's preemption by
//     recompute), and the waiting one takes its slot.
//
// What that guarantees, as in vLLM: within one priority value the order
// is arrival order, so a request is never overtaken nor preempted by a
// later one of its own priority (no starvation within a class); across
// priorities nothing ages, so a steady stream of better-priority work
// can hold a worse one back indefinitely. (vLLM V0's scheduler preempted
// for a waiting request when the sequence budget was spent, as here; V1
// preempts when KV blocks run short, with the same choice of victim.)
type scheduler struct {
	mu       sync.Mutex
	limit    int
	priority bool
	clock    uint64
	running  []*slotReq
	waiting  []*slotReq
	// preemptions counts preemptions since start or reset
	// (vllm:num_preemptions_total).
	preemptions atomic.Int64
}

// slotReq is one request's claim on a slot. Its channels are replaced
// each time it waits or runs anew, under scheduler.mu.
type slotReq struct {
	prio    int
	arrival uint64
	state   slotState
	ready   chan struct{} // closed when granted a slot
	evict   chan struct{} // closed when preempted while running
	// preempted counts the times it was preempted.
	preempted int
}

type slotState uint8

const (
	slotIdle slotState = iota
	slotWaiting
	slotRunning
)

// configure sets the slot cap and the policy; a higher cap admits
// waiters at once, a lower one lets the running sequences above it drain.
// Turning priority off leaves the running sequences running.
func (s *scheduler) configure(limit int, policy string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.priority = limit, policy == SchedulingPriority
	s.grantLocked()
}

// request returns the claim of a request of priority prio arriving now.
func (s *scheduler) request(prio int) *slotReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	return &slotReq{prio: prio, arrival: s.clock}
}

// acquire waits for r to be granted a slot (again, after a preemption).
// It reports false, holding nothing, when ctx ends first.
func (s *scheduler) acquire(ctx context.Context, r *slotReq) bool {
	s.mu.Lock()
	s.joinLocked(r)
	if r.state == slotRunning {
		s.mu.Unlock()
		return true
	}
	ready := r.ready
	s.mu.Unlock()
	select {
	case <-ready:
		return true
	case <-ctx.Done():
		s.release(r)
		return false
	}
}

// joinLocked puts an idle r among the waiting requests and lets the
// scheduler decide: it may run at once.
func (s *scheduler) joinLocked(r *slotReq) {
	if r.state == slotIdle {
		r.state, r.ready = slotWaiting, make(chan struct{})
		s.waiting = append(s.waiting, r)
		s.grantLocked()
	}
}

// evicted is the channel closed when r is preempted from the run it was
// last granted (closed already if it was).
func (s *scheduler) evicted(r *slotReq) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.evict
}

// isEvicted reports whether r was preempted and waits to run again.
func (s *scheduler) isEvicted(r *slotReq) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.preempted > 0 && r.state == slotWaiting
}

// release gives up whatever r holds or waits for, and passes the slot on.
func (s *scheduler) release(r *slotReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.state {
	case slotRunning:
		s.running = remove(s.running, r)
	case slotWaiting:
		s.waiting = remove(s.waiting, r)
	}
	r.state = slotIdle
	s.grantLocked()
}

// waitingCount is the number of requests waiting for a slot.
func (s *scheduler) waitingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

func remove(rs []*slotReq, r *slotReq) []*slotReq {
	if i := slices.Index(rs, r); i >= 0 {
		return slices.Delete(rs, i, i+1)
	}
	return rs
}

// ahead reports whether a goes before b: by arrival under fcfs, by
// (priority, arrival) under priority.
func (s *scheduler) ahead(a, b *slotReq) bool {
	if s.priority && a.prio != b.prio {
		return a.prio < b.prio
	}
	return a.arrival < b.arrival
}

func (s *scheduler) free() bool { return s.limit <= 0 || len(s.running) < s.limit }

// grantLocked hands free slots to the waiting requests first in order,
// then, under priority, preempts for those ahead of the last running one.
func (s *scheduler) grantLocked() {
	for len(s.waiting) > 0 {
		first := 0
		for i := range s.waiting {
			if s.ahead(s.waiting[i], s.waiting[first]) {
				first = i
			}
		}
		w := s.waiting[first]
		if !s.free() {
			if !s.priority || len(s.running) == 0 || len(s.running) > s.limit {
				return
			}
			last := 0
			for i := range s.running {
				if s.ahead(s.running[last], s.running[i]) {
					last = i
				}
			}
			v := s.running[last]
			if !s.ahead(w, v) {
				return
			}
			s.running = slices.Delete(s.running, last, last+1)
			v.state, v.ready = slotWaiting, make(chan struct{})
			v.preempted++
			close(v.evict)
			s.waiting = append(s.waiting, v)
			s.preemptions.Add(1)
			first = slices.Index(s.waiting, w)
		}
		s.waiting = slices.Delete(s.waiting, first, first+1)
		w.state, w.evict = slotRunning, make(chan struct{})
		s.running = append(s.running, w)
		close(w.ready)
	}
}
