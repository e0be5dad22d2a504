package ledger

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Writer defaults.
const (
	DefaultBuffer   = 10000
	DefaultBatch    = 500
	DefaultInterval = time.Second
	// DefaultSweepEvery is how often records past their retention are
	// deleted.
	DefaultSweepEvery   = 24 * time.Hour
	defaultCloseTimeout = 5 * time.Second
	// writeTimeout bounds one batch's write.
	writeTimeout = 5 * time.Second
	// keptBatches is how many written batches are kept for reuse.
	keptBatches = 2
)

// WriterOptions configure a Writer; zero values take the defaults.
type WriterOptions struct {
	// Buffer is how many records may wait for the store, the batch being
	// written included.
	Buffer int
	// Batch is the most records written at once; a full batch is written
	// at once, a partial one every Interval.
	Batch    int
	Interval time.Duration
	// Prices are the models' prices, by model type: each record's cost is
	// computed from them as it is written, at the price of the model that
	// answered (Record.PricedModel).
	Prices map[string]Price
	// Retention, when positive, is how long records are kept: older ones
	// are deleted when the writer starts and every SweepEvery (default a
	// day) after.
	Retention  time.Duration
	SweepEvery time.Duration
	// CloseTimeout bounds Close's last write; default 5 s.
	CloseTimeout time.Duration
	// Now is the clock of the retention sweep; time.Now when nil.
	Now    func() time.Time
	Logger *zap.Logger
}

// Writer takes records off the request path and writes them to a Store
// in batches, from a goroutine of its own.
//
// Records wait in batches (slices of Batch records) rather than in a
// channel of Buffer records: a channel's whole buffer, full or empty,
// would be scanned by every garbage collection (records hold strings),
// which costs the request path more than the records themselves. Only
// what waits is allocated, and written batches are reused.
type Writer struct {
	store Store
	opts  WriterOptions

	mu      sync.Mutex
	cur     []Record   // the batch being filled
	full    [][]Record // full batches, oldest first
	free    [][]Record // written batches, for reuse
	pending int        // records not yet written, the batch in hand included
	closed  bool

	// dropped counts the records refused, the buffer being full or the
	// writer closed, and those lost at close.
	dropped atomic.Uint64
	// written counts the records the store took.
	written atomic.Uint64
	// kick wakes the writer when a batch is full.
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error // the last write's failure, reported by Close
	// reported is the dropped count last logged (the run goroutine's).
	reported uint64
}

// NewWriter starts a Writer on store. Close stops it.
func NewWriter(store Store, opts WriterOptions) *Writer {
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	opts.Batch = min(opts.Batch, opts.Buffer)
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = DefaultSweepEvery
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = defaultCloseTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	w := &Writer{store: store, opts: opts,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Add hands r to the writer without waiting for the store: it reports
// false, and counts r as dropped, when the buffer is full or the writer
// closed. It allocates only when a new batch begins and no written one
// is free (not at all in a steady state).
func (w *Writer) Add(r Record) bool {
	w.mu.Lock()
	if w.closed || w.pending >= w.opts.Buffer {
		w.mu.Unlock()
		w.dropped.Add(1)
		return false
	}
	if w.cur == nil {
		if n := len(w.free); n > 0 {
			w.cur, w.free = w.free[n-1], w.free[:n-1]
		} else {
			w.cur = make([]Record, 0, w.opts.Batch)
		}
	}
	w.cur = append(w.cur, r)
	w.pending++
	kick := false
	if len(w.cur) >= w.opts.Batch {
		w.full, w.cur, kick = append(w.full, w.cur), nil, true
	}
	w.mu.Unlock()
	if kick {
		select {
		case w.kick <- struct{}{}:
		default: // already kicked
		}
	}
	return true
}

// BatchFactor is the part of model's price a batch's line pays (its
// price's Batch factor), 1 for a model without one, or without a price.
// Cost budgets charge a line the same part, so that they agree with the
// ledger.
func (w *Writer) BatchFactor(model string) float64 {
	if w == nil {
		return 1
	}
	if p, ok := w.opts.Prices[model]; ok && p.Batch > 0 {
		return p.Batch
	}
	return 1
}

// Dropped is how many records were refused (the buffer full, the writer
// closed) or lost at close.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Written is how many records the store took.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Pending is how many records wait to be written.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending
}

// Close writes what is buffered (giving up after CloseTimeout) and stops
// the writer. It does not close the store.
func (w *Writer) Close() error {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.stop)
	})
	<-w.done
	return w.err
}

// take hands the writer the oldest full batch, or with partial the batch
// being filled; nil when there is none.
func (w *Writer) take(partial bool) []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.full) > 0 {
		b := w.full[0]
		w.full[0] = nil
		w.full = w.full[1:]
		return b
	}
	if partial && len(w.cur) > 0 {
		b := w.cur
		w.cur = nil
		return b
	}
	return nil
}

// release counts a written batch out and keeps it for reuse.
func (w *Writer) release(b []Record) {
	clear(b) // its strings are not kept alive
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending -= len(b)
	if len(w.free) < keptBatches {
		w.free = append(w.free, b[:0])
	}
}

// run writes full batches when Add says one is ready, and whatever waits
// each Interval. While the store fails, the batch in hand is kept and
// tried again each Interval, no more is taken, and the records wait; the
// buffer filling up is what drops new ones.
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	var sweep <-chan time.Time
	if w.opts.Retention > 0 {
		w.sweep()
		t := time.NewTicker(w.opts.SweepEvery)
		defer t.Stop()
		sweep = t.C
	}
	var held []Record // a batch the store refused
	for {
		kick := w.kick
		if held != nil {
			kick = nil // retried on the interval only, not at every batch
		}
		partial := true
		select {
		case <-kick:
			partial = false
		case <-tick.C:
		case <-sweep:
			w.sweep()
			continue
		case <-w.stop:
			w.drain(held)
			return
		}
		held = w.flush(held, partial)
		w.reportDrops()
	}
}

// reportDrops logs, at most once a flush, that records were dropped
// since the last report: the count is otherwise only in Dropped.
func (w *Writer) reportDrops() {
	if d := w.dropped.Load(); d != w.reported {
		w.opts.Logger.Warn("ledger: records dropped, the buffer being full",
			zap.Uint64("dropped", d-w.reported), zap.Uint64("dropped_total", d), zap.Int("buffer", w.opts.Buffer))
		w.reported = d
	}
}

// flush writes held, then the waiting batches (the partial one too with
// partial); it returns the batch the store refused, or nil.
func (w *Writer) flush(held []Record, partial bool) []Record {
	for {
		b := held
		if b == nil {
			if b = w.take(partial); b == nil {
				return nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := w.write(ctx, b)
		cancel()
		if err != nil {
			w.err = err
			w.opts.Logger.Warn("ledger: writing records failed; they wait in the buffer",
				zap.Int("batch", len(b)), zap.Int("pending", w.Pending()), zap.Error(err))
			return b
		}
		w.err, held = nil, nil
		w.release(b)
	}
}

// Priced is r with its cost, as the writer would write it: for a record
// written elsewhere (InsertTx).
func (w *Writer) Priced(r Record) *Record {
	if p, ok := w.opts.Prices[r.PricedModel()]; ok {
		r.Cost = p.Cost(&r)
	}
	return &r
}

func (w *Writer) write(ctx context.Context, batch []Record) error {
	for i := range batch {
		if p, ok := w.opts.Prices[batch[i].PricedModel()]; ok {
			batch[i].Cost = p.Cost(&batch[i])
		}
	}
	if err := w.store.Write(ctx, batch); err != nil {
		return err
	}
	w.written.Add(uint64(len(batch)))
	return nil
}

// sweep deletes the records past their retention. A failure is logged
// and tried again at the next sweep.
func (w *Writer) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := w.store.Prune(ctx, w.opts.Now().Add(-w.opts.Retention))
	if err != nil {
		w.opts.Logger.Warn("ledger: deleting old records failed", zap.Error(err))
		return
	}
	if n > 0 {
		w.opts.Logger.Info("ledger: deleted records past their retention", zap.Int64("records", n),
			zap.Duration("retention", w.opts.Retention))
	}
}

// drain writes held and everything buffered, within CloseTimeout,
// retrying each Interval; what cannot be written by then is counted as
// dropped. Add refuses records once closed, so nothing arrives meanwhile.
func (w *Writer) drain(held []Record) {
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CloseTimeout)
	defer cancel()
	for {
		b := held
		if b == nil {
			if b = w.take(true); b == nil {
				return
			}
		}
		err := w.write(ctx, b)
		for err != nil && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(w.opts.Interval):
				err = w.write(ctx, b)
			}
		}
		if err != nil {
			lost := w.Pending()
			w.dropped.Add(uint64(lost))
			w.err = errors.Join(err, errLost)
			w.opts.Logger.Error("ledger: records lost at close: the store refused them",
				zap.Int("records", lost), zap.Error(err))
			return
		}
		w.err, held = nil, nil
		w.release(b)
	}
}

var errLost = errors.New("ledger: records lost at close")
