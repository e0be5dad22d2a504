package share

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/routing/prefix"
)

// Defaults of a Hub.
const (
	// DefaultInterval batches a flush's insertions: 20 writes a second per
	// instance whatever the traffic, and a peer learns a decision within
	// about this plus a round trip — far less than a conversation's next
	// turn takes to come.
	DefaultInterval = 50 * time.Millisecond
	// DefaultBuffer is how many insertions wait for the flusher; beyond
	// it they are dropped (counted). At 50 ms, 4,096 is 80,000 requests a
	// second per instance.
	DefaultBuffer = 4096
	// DefaultWindow is how far back an instance that joins reads, and how
	// long the stream outlives its last write.
	DefaultWindow = 5 * time.Minute
	// DefaultMaxLen bounds the stream's entries (Redis trims it, roughly):
	// with entries of at most MaxEntryBytes, 64 MiB of Redis at most,
	// usually a few.
	DefaultMaxLen = 2048
	// MaxEntryBytes bounds one stream entry; a flush with more writes
	// several.
	MaxEntryBytes = 32 << 10
	// retryEvery spaces attempts while Redis is unreachable.
	retryEvery = time.Second
	// callTimeout bounds one write.
	callTimeout = 2 * time.Second
	// block is how long a read waits for new entries.
	block = 2 * time.Second
)

// Options configure a Hub. Zero fields take the defaults.
type Options struct {
	// Redis is the server every instance shares; the Hub makes a client
	// of its own from it (its reads block, which must not hold the
	// connections of the request path's calls).
	Redis *redis.UniversalOptions
	// Key is the stream's key ("<prefix>routing").
	Key      string
	Interval time.Duration
	Buffer   int
	Window   time.Duration
	MaxLen   int64
	Logger   *zap.Logger
}

// Stats are a Hub's counters since it started.
type Stats struct {
	// Up is false while Redis is unreachable (each instance then routes on
	// its own view).
	Up bool
	// Published counts insertions written to the stream; Dropped those
	// lost (buffer full, or Redis unreachable); Applied the other
	// instances' insertions applied to an index; Ignored those for a model
	// or replica this instance does not serve, or hashed otherwise.
	Published, Dropped, Applied, Ignored uint64
	// Errors counts failed Redis calls and malformed entries.
	Errors uint64
}

// Hub shares the prefix indexes of one process with the other instances.
// Make it with New, attach each model's index (Attach), Start it; Destruct
// ends it. It is meant to be kept across configuration reloads (it
// implements keep.Destructor).
type Hub struct {
	opts     Options
	client   redis.UniversalClient
	instance string
	buf      chan record
	free     chan *[]uint64
	// kick asks the flusher to write now: a replica's queue changed.
	kick chan struct{}

	mu     sync.RWMutex
	models map[string][]*Model

	up                                             atomic.Bool
	published, dropped, applied, ignored, failures atomic.Uint64

	start  sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// record is one insertion waiting for the flusher; hashes come from the
// Hub's free list and go back once encoded.
type record struct {
	m       *Model
	replica string
	hashes  *[]uint64
}

// get takes an array for a record's hashes from the free list. A free
// list rather than a sync.Pool: records wait up to Interval in the buffer,
// so under load thousands of arrays are out at once, and a pool emptied at
// every garbage collection would allocate one per request. The list holds
// at most Buffer arrays of at most maxKept hashes: 32 MiB at worst, and
// as many arrays as were waiting at once at the busiest moment.
func (h *Hub) get() *[]uint64 {
	select {
	case p := <-h.free:
		return p
	default:
		return new([]uint64)
	}
}

// maxKept is the longest array the free list keeps: a prompt of the
// default max_blocks (1,024 hashes, 8 KiB). A longer one's array goes to
// the collector.
const maxKept = prefix.DefaultMaxBlocks

// put returns an array to the free list (or to the collector when the
// list is full or the array long).
func (h *Hub) put(p *[]uint64) {
	if cap(*p) > maxKept {
		return
	}
	select {
	case h.free <- p:
	default:
	}
}

// New makes a Hub; nothing runs before Start.
func New(opts Options) *Hub {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.MaxLen <= 0 {
		opts.MaxLen = DefaultMaxLen
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	ro := *opts.Redis
	// Its own small pool: one connection blocks in reads, one writes.
	ro.PoolSize, ro.MinIdleConns, ro.MaxIdleConns = 4, 0, 2
	var id [8]byte
	_, _ = rand.Read(id[:])
	h := &Hub{opts: opts, client: redis.NewUniversalClient(&ro), instance: hex.EncodeToString(id[:]),
		buf: make(chan record, opts.Buffer), free: make(chan *[]uint64, opts.Buffer), kick: make(chan struct{}, 1), models: map[string][]*Model{}}
	h.up.Store(true) // until a call says otherwise
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Instance names this process in the stream.
func (h *Hub) Instance() string { return h.instance }

// Start begins publishing and reading (once; later calls do nothing).
// Start it once the models are attached: what an instance that joins
// reads first is applied to the indexes attached by then.
func (h *Hub) Start() {
	h.start.Do(func() {
		h.wg.Add(2)
		go h.flushLoop()
		go h.readLoop()
	})
}

// Destruct stops the Hub and closes its client; insertions still buffered
// are dropped.
func (h *Hub) Destruct() error {
	h.cancel()
	err := h.client.Close() // interrupts a blocked read
	h.wg.Wait()
	return err
}

// Stats returns the counters.
func (h *Hub) Stats() Stats {
	return Stats{Up: h.up.Load(), Published: h.published.Load(), Dropped: h.dropped.Load(),
		Applied: h.applied.Load(), Ignored: h.ignored.Load(), Errors: h.failures.Load()}
}

// Model is one model's index attached to a Hub: its insertions are
// published, and the other instances' applied to it.
type Model struct {
	hub       *Hub
	name      string
	idx       *prefix.Index
	blockSize int
	// replicas are the model's current replicas; nil before the pool
	// first told (everything is applied then, and the index forgets the
	// replicas that are not in the pool when it is told).
	replicas atomic.Pointer[map[string]struct{}]
	// queues share the prefill queued on each replica (queues.go).
	queues queues
}

// Attach makes idx, model's index, shared. Detach when done with it.
func (h *Hub) Attach(model string, idx *prefix.Index) *Model {
	m := &Model{hub: h, name: model, idx: idx, blockSize: idx.Hasher().BlockSize()}
	h.mu.Lock()
	h.models[model] = append(h.models[model], m)
	h.mu.Unlock()
	return m
}

// Detach stops applying the other instances' insertions to the index.
func (m *Model) Detach() {
	h := m.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.models[m.name]
	for i, x := range list {
		if x == m {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.models, m.name)
	} else {
		h.models[m.name] = list
	}
	m.stopQueues()
}

// SetReplicas says which replicas the model has now: the other instances'
// insertions for any other are ignored (they would take a slot of the
// index for a replica this instance cannot send to).
func (m *Model) SetReplicas(urls []string) {
	set := make(map[string]struct{}, len(urls))
	for _, u := range urls {
		set[u] = struct{}{}
	}
	m.replicas.Store(&set)
}

// Publish queues an insertion for the other instances. It copies hashes
// (the caller may reuse them) and never blocks: with the buffer full, the
// insertion is dropped and counted.
func (m *Model) Publish(replica string, hashes []uint64) {
	if m == nil || len(hashes) == 0 {
		return
	}
	p := m.hub.get()
	*p = append((*p)[:0], hashes...)
	select {
	case m.hub.buf <- record{m: m, replica: replica, hashes: p}:
	default:
		m.hub.put(p)
		m.hub.dropped.Add(1)
	}
}

// apply hands one of the other instances' insertions to every index of
// its model that hashes the same way and serves its replica.
func (h *Hub) apply(in Insertion) {
	h.mu.RLock()
	list := h.models[in.Model]
	h.mu.RUnlock()
	var seen []*prefix.Index
	for _, m := range list {
		if m.blockSize != in.BlockSize || slices.Contains(seen, m.idx) {
			continue // another hashing; or the same index, attached twice during a reload
		}
		if set := m.replicas.Load(); set != nil {
			if _, ok := (*set)[in.Replica]; !ok {
				continue
			}
		}
		if err := m.idx.Learn(in.Replica, in.Hashes); err == nil {
			seen = append(seen, m.idx)
		}
	}
	if len(seen) > 0 {
		h.applied.Add(1)
	} else {
		h.ignored.Add(1)
	}
}

// state records whether Redis answered, logging the changes.
func (h *Hub) state(err error) {
	if err == nil {
		if !h.up.Swap(true) {
			h.opts.Logger.Info("redis reachable again: routing is shared again")
			h.forgetTold() // the others stopped counting this instance's queues
		}
		return
	}
	h.failures.Add(1)
	if h.up.Swap(false) {
		h.opts.Logger.Error("redis unreachable: each instance routes on its own view until it answers", zap.Error(err))
	}
}
