package batch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Worker names this runner's leases; unique per instance (default:
	// the host name, the process id and a random suffix).
	Worker string
	// Lease is how long a claimed line is held without a heartbeat
	// (default 30s); leases are renewed every Lease/3.
	Lease time.Duration
	// Chunk is how many lines are claimed at a time (default 8).
	Chunk int
	// MaxAttempts is how many times a line whose replica failed (status
	// 0 or 5xx) is tried before its failure is its answer (default 3).
	MaxAttempts int
	// Poll is how often an idle runner looks for work (default 1s).
	Poll   time.Duration
	Logger *zap.Logger
	Now    func() time.Time
}

// Retrier is a Store that gives lines back counting an attempt (SQLStore
// is one). With a Store that is not, a line to retry is left to its
// lease, whose lapse counts the attempt.
type Retrier interface {
	Retry(ctx context.Context, worker string, lines []Line) error
}

const (
	// regate is how often the gate is asked again while lines wait:
	// batches ramp up into freed capacity and back off within it.
	regate = 100 * time.Millisecond
	// backoff bounds how long a model rests after the dispatcher
	// refused a line (saturated, shed, no replica).
	minBackoff, maxBackoff = 100 * time.Millisecond, 2 * time.Second
)

// Runner claims batch lines of every model the Gate gives room and
// runs them through the Dispatcher, validating and finalizing batches
// beside: any number of runners, on any instances sharing the Store,
// work on the same batches.
type Runner struct {
	s Store
	d Dispatcher
	g Gate
	o RunnerOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  sync.Once
	wake   chan struct{} // a line ended or a batch became ready
	// relist: a batch became ready, so the models with lines changed.
	relist atomic.Bool

	mu      sync.Mutex
	running map[string]int
	held    map[lineKey]Line
	rest    map[string]rest // model → its backoff
}

type lineKey struct {
	batch string
	index int
}

type rest struct {
	until time.Time
	delay time.Duration
}

// NewRunner returns a runner; Start starts it.
func NewRunner(s Store, d Dispatcher, g Gate, o RunnerOptions) *Runner {
	if o.Worker == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Worker = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Chunk <= 0 {
		o.Chunk = 8
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{s: s, d: d, g: g, o: o, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		running: map[string]int{}, held: map[lineKey]Line{}, rest: map[string]rest{}}
}

// Start starts the runner's loops.
func (r *Runner) Start() {
	r.start.Do(func() {
		r.wg.Add(3)
		go r.housekeep()
		go r.dispatchLoop()
		go r.heartbeat()
	})
}

// Stop stops claiming, cancels the lines running, gives back the lines
// it holds and waits for its goroutines.
func (r *Runner) Stop() {
	r.cancel()
	r.wg.Wait()
}

// Running is how many lines of model this runner runs now.
func (r *Runner) Running(model string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[model]
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// housekeep validates new batches and finalizes finished ones, every
// Poll.
func (r *Runner) housekeep() {
	defer r.wg.Done()
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	for {
		for r.ctx.Err() == nil {
			b, err := r.s.Validate(r.ctx, r.o.Worker, r.o.Lease)
			if errors.Is(err, ErrNotFound) {
				break
			}
			if err != nil {
				if r.ctx.Err() == nil {
					r.o.Logger.Warn("batch: validating", zap.Error(err))
				}
				break
			}
			r.o.Logger.Info("batch: validated", zap.String("batch", b.ID), zap.String("status", string(b.Status)),
				zap.Int("lines", b.Counts.Total), zap.Int("errors", len(b.Errors)))
			r.relist.Store(true)
			r.poke()
		}
		if r.ctx.Err() == nil {
			done, err := r.s.Finalize(r.ctx, r.o.Worker, r.o.Now())
			if err != nil && r.ctx.Err() == nil {
				r.o.Logger.Warn("batch: finalizing", zap.Error(err))
			}
			for _, b := range done {
				r.o.Logger.Info("batch: finished", zap.String("batch", b.ID), zap.String("status", string(b.Status)),
					zap.Int("completed", b.Counts.Completed), zap.Int("failed", b.Counts.Failed))
			}
		}
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// dispatchLoop asks the gate for each model with lines and starts as
// many as it has room for: every regate while lines wait, every Poll
// when there are none.
func (r *Runner) dispatchLoop() {
	defer r.wg.Done()
	var models []string
	var listed time.Time
	for r.ctx.Err() == nil {
		now := time.Now()
		if now.Sub(listed) >= r.o.Poll || models == nil || r.relist.Swap(false) {
			m, err := r.s.Models(r.ctx)
			if err != nil && r.ctx.Err() == nil {
				r.o.Logger.Warn("batch: listing models with lines", zap.Error(err))
			}
			models, listed = m, now
			if models == nil {
				models = []string{}
			}
		}
		again := false // a model's claim came back full: more wait
		left := models[:0]
		for _, model := range models {
			full, more := r.fill(model)
			if full {
				again = true
			}
			if more {
				left = append(left, model)
			}
		}
		models = left
		wait := r.o.Poll
		switch {
		case again:
			continue
		case len(models) > 0:
			wait = regate
		}
		select {
		case <-r.ctx.Done():
		case <-r.wake: // a slot freed or a batch became ready
		case <-time.After(wait):
		}
	}
}

// fill starts lines of model up to the gate's room and one chunk: full
// when it claimed a whole chunk and room is left, more when the model
// may have lines left (to ask again soon).
func (r *Runner) fill(model string) (full, more bool) {
	r.mu.Lock()
	running, rst := r.running[model], r.rest[model]
	r.mu.Unlock()
	if time.Now().Before(rst.until) {
		return false, true
	}
	room := r.g.Room(model, running)
	if room <= 0 {
		return false, true
	}
	n := min(room, r.o.Chunk)
	lines, err := r.s.Claim(r.ctx, r.o.Worker, model, n, r.o.Lease)
	if err != nil {
		if r.ctx.Err() == nil {
			r.o.Logger.Warn("batch: claiming lines", zap.String("model", model), zap.Error(err))
		}
		return false, true
	}
	for _, l := range lines {
		r.launch(l)
	}
	return len(lines) == n && room > n, len(lines) == n
}

// launch runs one line in its own goroutine.
func (r *Runner) launch(l Line) {
	k := lineKey{l.BatchID, l.Index}
	r.mu.Lock()
	r.running[l.Model]++
	r.held[k] = l
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.run(l)
		r.mu.Lock()
		delete(r.held, k)
		if r.running[l.Model]--; r.running[l.Model] <= 0 {
			delete(r.running, l.Model)
		}
		r.mu.Unlock()
		r.poke()
	}()
}

// run dispatches a line and writes its outcome.
func (r *Runner) run(l Line) {
	// What is written after the runner stopped still has a moment.
	after := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
	}
	log := r.o.Logger.With(zap.String("batch", l.BatchID), zap.Int("line", l.Index))
	if l.Attempts >= r.o.MaxAttempts {
		// Its runs ended without an answer that often (a worker lost
		// each time): its failure is its answer.
		r.complete(log, Result{StatusCode: 0, Err: &LineError{Code: "server_error",
			Message: fmt.Sprintf("The request was tried %d times without an answer.", l.Attempts)}}, l)
		return
	}
	res, err := r.d.Dispatch(r.ctx, l)
	if err == nil && r.ctx.Err() != nil && res.Err == nil && res.StatusCode == 0 {
		err = r.ctx.Err() // stopped midway: not the replica's failure
	}
	if err != nil {
		ctx, cancel := after()
		defer cancel()
		if rerr := r.s.Release(ctx, r.o.Worker, []Line{l}); rerr != nil {
			log.Warn("batch: releasing a line", zap.Error(rerr))
		}
		if r.ctx.Err() == nil {
			r.backOff(l.Model)
			log.Debug("batch: the gateway refused a line; released", zap.Error(err))
		}
		return
	}
	r.settle(l.Model)
	if res.Err == nil && (res.StatusCode == 0 || res.StatusCode >= 500) && l.Attempts+1 < r.o.MaxAttempts {
		// The replica failed, not the line: it is tried again.
		ctx, cancel := after()
		defer cancel()
		if rt, ok := r.s.(Retrier); ok {
			if err := rt.Retry(ctx, r.o.Worker, []Line{l}); err != nil {
				log.Warn("batch: giving a line back to retry", zap.Error(err))
			}
		}
		log.Debug("batch: the replica failed a line; retried", zap.Int("status", res.StatusCode), zap.Int("attempt", l.Attempts+1))
		return
	}
	if res.Err == nil && res.StatusCode == 0 {
		res.Err = &LineError{Code: "server_error", Message: fmt.Sprintf("The replica failed the request %d times.", l.Attempts+1)}
	}
	r.complete(log, res, l)
}

func (r *Runner) complete(log *zap.Logger, res Result, l Line) {
	res.BatchID, res.CustomID, res.Index = l.BatchID, l.CustomID, l.Index
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
	defer cancel()
	err := r.s.Complete(ctx, r.o.Worker, res)
	switch {
	case errors.Is(err, ErrLeaseLost):
		log.Debug("batch: a line's result was written by another worker; dropped")
	case err != nil:
		// The lease lapses and another worker runs the line again.
		log.Warn("batch: writing a line's result", zap.Error(err))
	}
}

// backOff rests model after a refusal, doubling while they repeat.
func (r *Runner) backOff(model string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rst := r.rest[model]
	rst.delay = min(max(rst.delay*2, minBackoff), maxBackoff)
	rst.until = time.Now().Add(rst.delay)
	r.rest[model] = rst
}

func (r *Runner) settle(model string) {
	r.mu.Lock()
	delete(r.rest, model)
	r.mu.Unlock()
}

// heartbeat renews the leases of the lines running, every Lease/3.
func (r *Runner) heartbeat() {
	defer r.wg.Done()
	t := time.NewTicker(r.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		lines := make([]Line, 0, len(r.held))
		for _, l := range r.held {
			lines = append(lines, l)
		}
		r.mu.Unlock()
		if err := r.s.Renew(r.ctx, r.o.Worker, lines, r.o.Lease); err != nil && r.ctx.Err() == nil {
			r.o.Logger.Info("batch: renewing leases", zap.Error(err))
		}
	}
}
