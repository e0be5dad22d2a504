package simulator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmedge/llmedge/api"
)

// engine is the simulated GPU that a Server's chat requests share. It models
// what an LLM-aware router must reckon with, deterministically and cheaply:
//
//   - A prefix cache of the prompt's KV blocks (prompt.go), of one of two
//     kinds (Config.PrefixCache). "blocks" (prefixcache.go, vLLM's): an LRU
//     of blocks shared by all requests; a request's cached prefix is the
//     leading run of its blocks the cache holds, and after its prefill all
//     its blocks are inserted or touched. "slots" (slotcache.go, Ollama's):
//     one prompt per sequence slot; a request takes the free slot sharing
//     the longest prefix with it, and after its prefill the slot holds its
//     prompt instead.
//   - Sequence slots: at most Config.MaxNumSeqs requests run at once (like
//     vLLM's --max-num-seqs, or Ollama's one request at a time); the others
//     wait for a slot in FIFO order, or with Config.SchedulingPolicy
//     priority in the order of their priority, a better one preempting a
//     running sequence (sched.go): the preempted request waits again and
//     recomputes its prompt and the tokens it had generated, at
//     PrefillPerToken each, when it resumes.
//   - One prefill lane: a GPU prefills one batch at a time, and the
//     simulator serialises prefills through a FIFO lane, so that prefill
//     work queues under load. A request holds the lane for its uncached
//     prompt tokens × Config.PrefillPerToken. Decoding is not serialised:
//     every running sequence emits a token each ITL, as a batch would.
//
// Time to first token is therefore: waiting for a slot, waiting for the
// lane, the prefill of the uncached tokens, then the fixed Config.TTFT (the
// engine's per-request overhead, which overlaps with other requests). With
// PrefillPerToken 0 the lane is skipped altogether (there is nothing to
// serialise), so that a simulator meant for throughput (the benchmark's)
// is not capped by a lane of timer waits.
//
// A request is waiting (vllm:num_requests_waiting) until its prefill begins,
// whether it waits for a slot or for the lane, and running
// (vllm:num_requests_running) from then until it ends. KV usage is the
// blocks running sequences hold over Config.KVCacheBlocks, each reserving
// ceil((prompt + reply tokens) / BlockSize) blocks from its prefill on, as
// if none shared a block; blocks cached but held by no running request
// count as free, as vLLM and SGLang count them. The prefix cache itself is
// bounded by KVCacheBlocks on its own: the simulator models no memory
// pressure between the two (preemption is for a better priority only).
//
// Every wait ends at once when the client goes away, releasing what the
// request held.
type engine struct {
	// Both kinds of prefix cache exist; the Config a request runs under
	// says which it uses, and configure empties the other.
	cache *prefixCache
	slots *slotCache
	seqs  scheduler // running-sequence slots, limited to MaxNumSeqs
	lane  fifo      // the prefill lane, limited to 1

	running, waiting atomic.Int64
	kvHeld           atomic.Int64 // blocks reserved by running sequences
}

func newEngine(cfg Config) *engine {
	e := &engine{cache: newPrefixCache(cfg.BlockSize, cfg.KVCacheBlocks),
		slots: newSlotCache(cfg.BlockSize, cfg.MaxNumSeqs)}
	e.seqs.configure(cfg.MaxNumSeqs, cfg.SchedulingPolicy)
	e.lane.limit = 1
	return e
}

// configure applies a changed Config to the shared state: the caches'
// geometry, the sequence cap, which admits waiters at once if raised, and
// the cache kind. The kind not in use is emptied, so that switching back
// finds no prompts from before; its counters stay, so that the reported
// prefix-cache counters never go back.
func (e *engine) configure(cfg Config) {
	e.cache.configure(cfg.BlockSize, cfg.KVCacheBlocks)
	e.slots.configure(cfg.BlockSize, cfg.MaxNumSeqs)
	if usesSlots(cfg) {
		e.cache.clear()
	} else {
		e.slots.clear()
	}
	e.seqs.configure(cfg.MaxNumSeqs, cfg.SchedulingPolicy)
}

// usesSlots reports whether cfg's prefix cache is the slot kind.
func usesSlots(cfg Config) bool { return cfg.PrefixCache == PrefixCacheSlots }

// cacheStats sums both caches' counters and reports the blocks of the one
// cfg uses.
func (e *engine) cacheStats(cfg Config) cacheStats {
	b, s := e.cache.stats(), e.slots.stats()
	st := cacheStats{queries: b.queries + s.queries, hits: b.hits + s.hits, blocks: b.blocks}
	if usesSlots(cfg) {
		st.blocks = s.blocks
	}
	return st
}

// resetCaches empties both caches and zeroes their counters.
func (e *engine) resetCaches() {
	e.cache.reset()
	e.slots.reset()
	e.seqs.preemptions.Store(0)
}

// kvUsage is the fraction (0..1) of capacity blocks running sequences hold.
func (e *engine) kvUsage(capacity int) float64 {
	if capacity <= 0 {
		return 0
	}
	return min(float64(e.kvHeld.Load())/float64(capacity), 1)
}

// seqState is where a sequence is in the engine.
type seqState uint8

const (
	seqNew seqState = iota
	seqWaiting
	seqRunning
)

// sequence is one chat request's passage through the engine. A handler
// creates it once the request is valid, calls firstToken before its first
// token, and end when it is done, whatever happened.
type sequence struct {
	e        *engine
	cfg      Config
	msgs     []api.Message
	cut      promptCut
	tokens   int   // prompt tokens
	kvBlocks int64 // blocks reserved while running
	state    seqState
	laneHeld bool
	// prio is the request's priority (its body's "priority", 0 when
	// none); claim its sequence slot, once firstToken asked for one, and
	// evict the channel closed if it is preempted while it runs.
	prio  int
	claim *slotReq
	evict <-chan struct{}
	// blocks are the prompt's block hashes, for a recompute's lookup.
	blocks []uint64
	// decoded is the decode time done so far: the tokens generated, which
	// a preempted request recomputes with its prompt.
	decoded time.Duration
	// slot is the cache slot held (slot cache only), or -1.
	slot int
	buf  *[]uint64 // pooled block hashes
	// prefill is the time the prefill took (uncached tokens ×
	// PrefillPerToken), once firstToken got that far.
	prefill time.Duration
	// cached is the prompt tokens the prefix cache held, once firstToken
	// got that far.
	cached int
}

// blockBufs recycles the block-hash slices of finished requests, so that
// hashing a prompt allocates nothing in the steady state.
var blockBufs = sync.Pool{New: func() any { b := make([]uint64, 0, 64); return &b }}

// maxPooledBlocks keeps unusually long prompts' slices out of the pool.
const maxPooledBlocks = 1 << 14

// sequence returns the passage of a request of p under cfg.
func (e *engine) sequence(cfg Config, p plan) *sequence {
	bs := int64(max(cfg.BlockSize, 1))
	return &sequence{e: e, cfg: cfg, msgs: p.Prompt, cut: p.Cut, tokens: p.PromptTokens, slot: -1,
		kvBlocks: (int64(p.PromptTokens+p.completionTokens()) + bs - 1) / bs}
}

// firstToken waits for everything before the first token: a sequence slot,
// the prefill lane (when PrefillPerToken is set), the prefill of the prompt
// tokens the prefix cache lacks, and TTFT. It reports false when the client
// left first. Call it once.
func (q *sequence) firstToken(ctx context.Context) bool {
	e, cfg := q.e, q.cfg
	var blocks []uint64
	if !cfg.NoPrefixCache && q.tokens >= cfg.BlockSize {
		// Hash before queueing: it needs no lock, and the lane stays short.
		q.buf = blockBufs.Get().(*[]uint64)
		*q.buf, _ = promptBlocksCut((*q.buf)[:0], q.msgs, cfg.BlockSize, q.cut)
		blocks = *q.buf
	}
	q.blocks = blocks
	q.setState(seqWaiting)
	q.claim = e.seqs.request(q.prio)
	if !e.seqs.acquire(ctx, q.claim) {
		return false
	}
	q.evict = e.seqs.evicted(q.claim)
	lane := cfg.PrefillPerToken > 0
	if lane {
		if q.laneHeld = e.lane.acquire(ctx); !q.laneHeld {
			return false
		}
	}
	q.setState(seqRunning)
	// Look up only now, in the lane: the prefills ahead of this one may
	// have just cached its prefix.
	cached, slots := 0, usesSlots(cfg)
	switch {
	case cfg.NoPrefixCache:
	case slots:
		q.slot, cached = e.slots.acquire(blocks, cfg.BlockSize, q.tokens)
	default:
		cached = e.cache.lookup(blocks, cfg.BlockSize, q.tokens)
	}
	q.cached = cached
	q.prefill = time.Duration(q.tokens-cached) * cfg.PrefillPerToken.D()
	ok := sleep(ctx, q.prefill)
	switch {
	case !ok || len(blocks) == 0:
		// A prefill cut short caches nothing more.
	case slots:
		e.slots.store(q.slot, blocks, cfg.BlockSize)
	default:
		e.cache.insert(blocks, cfg.BlockSize)
	}
	if lane {
		e.lane.release()
		q.laneHeld = false
	}
	if !ok || !sleep(ctx, cfg.TTFT.D()) {
		return false
	}
	// Preempted before its first token: it has it only once it ran again.
	return q.resume(ctx)
}

// decode waits d of decoding. A sequence preempted meanwhile stops
// decoding until it runs again and has recomputed what it had (resume);
// the rest of d follows. It reports false when the client left first.
func (q *sequence) decode(ctx context.Context, d time.Duration) bool {
	if q == nil || q.evict == nil {
		return sleep(ctx, d)
	}
	for d > 0 {
		start := time.Now()
		t := time.NewTimer(d)
		select {
		case <-t.C:
			q.decoded += d
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		case <-q.evict:
			t.Stop()
			el := time.Since(start)
			q.decoded += el
			d -= el
			if !q.resume(ctx) {
				return false
			}
		}
	}
	return ctx.Err() == nil
}

// resume, for a sequence preempted (and as often as it is preempted
// again meanwhile), waits for a slot again and recomputes: the prefill of
// its prompt, less what the prefix cache still holds, and of the tokens
// it had generated, through the prefill lane. vLLM preempts by
// recompute: the preempted request's KV blocks are freed and it is
// scheduled again as a new prompt. It reports false when the client left
// first; for a sequence not preempted it reports true at once.
func (q *sequence) resume(ctx context.Context) bool {
	e, cfg := q.e, q.cfg
	for e.seqs.isEvicted(q.claim) {
		q.setState(seqWaiting)
		if !e.seqs.acquire(ctx, q.claim) {
			return false
		}
		q.evict = e.seqs.evicted(q.claim)
		lane := cfg.PrefillPerToken > 0
		if lane {
			if q.laneHeld = e.lane.acquire(ctx); !q.laneHeld {
				return false
			}
		}
		q.setState(seqRunning)
		cached := 0
		if !cfg.NoPrefixCache && !usesSlots(cfg) {
			cached = e.cache.lookup(q.blocks, cfg.BlockSize, q.tokens)
		}
		generated := 1
		if itl := cfg.ITL.D(); itl > 0 {
			generated += int(q.decoded / itl)
		}
		ok := sleep(ctx, time.Duration(q.tokens-cached+generated)*cfg.PrefillPerToken.D())
		if lane {
			e.lane.release()
			q.laneHeld = false
		}
		if !ok {
			return false
		}
	}
	return ctx.Err() == nil
}

// setState moves q to s and keeps the engine's gauges in step.
func (q *sequence) setState(s seqState) {
	switch q.state {
	case seqWaiting:
		q.e.waiting.Add(-1)
	case seqRunning:
		q.e.running.Add(-1)
		q.e.kvHeld.Add(-q.kvBlocks)
	}
	q.state = s
	switch s {
	case seqWaiting:
		q.e.waiting.Add(1)
	case seqRunning:
		q.e.running.Add(1)
		q.e.kvHeld.Add(q.kvBlocks)
	}
}

// end releases whatever q holds. It is safe to call on a sequence that
// never started, and more than once.
func (q *sequence) end() {
	if q.laneHeld {
		q.e.lane.release()
		q.laneHeld = false
	}
	if q.slot >= 0 {
		q.e.slots.release(q.slot)
		q.slot = -1
	}
	if q.claim != nil {
		q.e.seqs.release(q.claim)
		q.claim, q.evict = nil, nil
	}
	q.setState(seqNew)
	if q.buf != nil {
		if cap(*q.buf) <= maxPooledBlocks {
			blockBufs.Put(q.buf)
		}
		q.buf = nil
	}
}
