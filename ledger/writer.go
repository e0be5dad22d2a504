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
)

// WriterOptions configure a Writer; zero values take the defaults.
type WriterOptions struct {
	// Buffer is how many records may wait for the store.
	Buffer int
	// Batch is the most records written at once; a full batch is written
	// at once, a partial one every Interval.
	Batch    int
	Interval time.Duration
	// Prices are the models' prices, by model type: each record's cost is
	// computed from them as it is written.
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
type Writer struct {
	store  Store
	opts   WriterOptions
	in     chan Record
	closed atomic.Bool
	// dropped counts the records refused because the buffer was full.
	dropped atomic.Uint64
	// written counts the records the store took.
	written atomic.Uint64
	// kick wakes the writer when a batch's worth is buffered.
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error // the last write's failure, reported by Close
}

// NewWriter starts a Writer on store. Close stops it.
func NewWriter(store Store, opts WriterOptions) *Writer {
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
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
	w := &Writer{store: store, opts: opts, in: make(chan Record, opts.Buffer),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Add hands r to the writer without blocking: it reports false, and
// counts r as dropped, when the buffer is full or the writer closed.
func (w *Writer) Add(r Record) bool {
	if w.closed.Load() {
		w.dropped.Add(1)
		return false
	}
	select {
	case w.in <- r:
		if len(w.in) >= w.opts.Batch {
			select {
			case w.kick <- struct{}{}:
			default: // already kicked
			}
		}
		return true
	default:
		w.dropped.Add(1)
		return false
	}
}

// Dropped is how many records were refused, the buffer being full.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Written is how many records the store took.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Pending is how many records wait in the buffer (not counting a batch
// being written).
func (w *Writer) Pending() int { return len(w.in) }

// Close writes what is buffered (giving up after a few seconds) and stops
// the writer. It does not close the store.
func (w *Writer) Close() error {
	w.once.Do(func() {
		w.closed.Store(true)
		close(w.stop)
	})
	<-w.done
	return w.err
}

// run writes the buffered records in batches, each Interval or when
// Add finds a batch's worth waiting (the kick). It does not wait on the
// buffer itself: a goroutine blocked on it would be woken by every
// record, a scheduling round trip on the request path; this way a busy
// gateway pays one per batch. While the store fails, the batch in hand is
// kept and tried again each Interval, and no more is taken from the
// buffer: the records wait there, and the buffer filling up is what drops
// new ones.
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
	batch := make([]Record, 0, w.opts.Batch)
	failing := false
	for {
		kick := w.kick
		if failing {
			kick = nil // retried on the interval only, not at every record
		}
		select {
		case <-kick:
		case <-tick.C:
		case <-sweep:
			w.sweep()
			continue
		case <-w.stop:
			w.drain(batch)
			return
		}
		for {
			batch = w.fill(batch)
			if batch, failing = w.flush(batch); failing || len(w.in) < w.opts.Batch {
				break // written up to a partial batch, which the next tick takes
			}
		}
	}
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

// fill moves buffered records into batch, up to a full batch.
func (w *Writer) fill(batch []Record) []Record {
	for len(batch) < w.opts.Batch {
		select {
		case r := <-w.in:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// flush writes batch, pricing it first; it returns the batch emptied, or
// kept whole with failing set when the store refused it.
func (w *Writer) flush(batch []Record) ([]Record, bool) {
	if len(batch) == 0 {
		return batch, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if err := w.write(ctx, batch); err != nil {
		w.err = err
		w.opts.Logger.Warn("ledger: writing records failed; they wait in the buffer",
			zap.Int("batch", len(batch)), zap.Int("buffered", len(w.in)), zap.Error(err))
		return batch, true
	}
	w.err = nil
	return batch[:0], false
}

func (w *Writer) write(ctx context.Context, batch []Record) error {
	for i := range batch {
		if p, ok := w.opts.Prices[batch[i].Model]; ok {
			batch[i].Cost = p.Cost(&batch[i])
		}
	}
	if err := w.store.Write(ctx, batch); err != nil {
		return err
	}
	w.written.Add(uint64(len(batch)))
	return nil
}

// drain writes the batch and everything buffered, within CloseTimeout;
// what cannot be written then is counted as dropped.
func (w *Writer) drain(batch []Record) {
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CloseTimeout)
	defer cancel()
	for {
		batch = w.fill(batch)
		if len(batch) == 0 {
			return
		}
		err := w.write(ctx, batch)
		for err != nil && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(w.opts.Interval):
				err = w.write(ctx, batch)
			}
		}
		if err != nil {
			lost := len(batch) + len(w.in)
			w.dropped.Add(uint64(lost))
			w.err = errors.Join(err, errLost)
			w.opts.Logger.Error("ledger: records lost at close: the store refused them",
				zap.Int("records", lost), zap.Error(err))
			return
		}
		w.err = nil
		batch = batch[:0]
	}
}

var errLost = errors.New("ledger: records lost at close")
