package simulator

import (
	"context"
	"slices"
	"sync"
)

// fifo is a counting semaphore that grants in arrival order, unlike
// sync.Mutex or a buffered channel, and whose waiters give up as soon as
// their context ends, so that no goroutine outlives its request. Its limit
// can change at any time; 0 means no limit.
//
// Acquiring without waiting allocates nothing; a waiter costs one small
// allocation.
type fifo struct {
	mu    sync.Mutex
	limit int
	held  int
	queue []*fifoWaiter
}

type fifoWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // under fifo.mu
}

// acquire takes a unit, waiting behind earlier waiters if none is free. It
// reports false, holding nothing, when ctx ends first.
func (f *fifo) acquire(ctx context.Context) bool {
	f.mu.Lock()
	if len(f.queue) == 0 && f.freeLocked() {
		f.held++
		f.mu.Unlock()
		return true
	}
	if ctx.Err() != nil {
		f.mu.Unlock()
		return false
	}
	w := &fifoWaiter{ready: make(chan struct{})}
	f.queue = append(f.queue, w)
	f.mu.Unlock()

	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	}
	f.mu.Lock()
	if w.granted {
		// Granted while the client left: pass the unit on.
		f.held--
		f.grantLocked()
	} else if i := slices.Index(f.queue, w); i >= 0 {
		f.queue = slices.Delete(f.queue, i, i+1)
	}
	f.mu.Unlock()
	return false
}

// release gives a unit back, to the longest waiter if there is one.
func (f *fifo) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held--
	f.grantLocked()
}

// setLimit changes the limit; a higher one (or none) admits waiters at
// once, a lower one lets the units held above it drain as they are
// released.
func (f *fifo) setLimit(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limit = n
	f.grantLocked()
}

// waiting is the number of waiters.
func (f *fifo) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

func (f *fifo) freeLocked() bool { return f.limit <= 0 || f.held < f.limit }

// grantLocked hands free units to waiters in arrival order.
func (f *fifo) grantLocked() {
	for len(f.queue) > 0 && f.freeLocked() {
		w := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		f.held++
		w.granted = true
		close(w.ready)
	}
	if len(f.queue) == 0 {
		f.queue = f.queue[:0:0] // drop the drifted backing array
	}
}
