package prefix

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/llmedge/llmedge/api"
)

// MaxReplicas is the number of replicas an Index tracks at once. Each
// block carries a bitset of the replicas holding it, which is what makes
// Match one map lookup per block whatever the number of candidates; 128
// bits keep that bitset two words wide.
const MaxReplicas = 128

// DefaultCapacity is the number of blocks remembered per replica: 65,536
// blocks of about 16 tokens, a KV cache of about a million tokens.
const DefaultCapacity = 65536

const words = MaxReplicas / 64

// none is the nil link of the arenas.
const none = -1

// Config sizes an Index. Zero fields take the defaults.
type Config struct {
	// BlockSize is the number of prompt bytes per block (DefaultBlockSize).
	BlockSize int
	// MaxBlocks caps the blocks hashed and recorded per prompt
	// (DefaultMaxBlocks).
	MaxBlocks int
	// Capacity is the number of blocks remembered per replica
	// (DefaultCapacity): set it to the replicas' KV cache size in tokens
	// divided by the tokens per block (about BlockSize/4).
	Capacity int
}

// slotSet is a set of replica slots.
type slotSet [words]uint64

func (s *slotSet) add(i int)           { s[i>>6] |= 1 << (i & 63) }
func (s *slotSet) del(i int)           { s[i>>6] &^= 1 << (i & 63) }
func (s *slotSet) has(i int) bool      { return s[i>>6]&(1<<(i&63)) != 0 }
func (s *slotSet) empty() bool         { return s[0]|s[1] == 0 }
func (s *slotSet) and(o *slotSet) bool { s[0] &= o[0]; s[1] &= o[1]; return s[0]|s[1] != 0 }

// entry is one distinct block hash and the replicas holding it.
type entry struct {
	hash  uint64
	mask  slotSet
	pairs int32 // first node of the replicas holding it; next free entry when free
}

// node is one block held by one replica: an element of that replica's LRU
// list, and of the block's list of holders.
type node struct {
	entry int32
	prev  int32 // towards the most recently used
	next  int32 // towards the least recently used; next free node when free
	sib   int32 // next holder of the same block
	slot  uint8
}

// replica is the state of one slot.
type replica struct {
	name       string
	live       bool
	head, tail int32 // most and least recently used nodes
	blocks     int
	inserts    uint64
	inserted   uint64
	hits       uint64
}

// Index is the approximate prefix-cache index of one model. It is safe
// for concurrent use: Match takes a read lock, Insert and Remove a write
// lock, each for a few microseconds; hashing happens outside any lock.
type Index struct {
	model    string
	hasher   Hasher
	capacity int

	lookups atomic.Uint64

	mu        sync.RWMutex
	byHash    map[uint64]int32
	entries   []entry
	freeEntry int32
	nodes     []node
	freeNode  int32
	slots     map[string]int
	reps      [MaxReplicas]replica
	peak      int // most entries byHash ever held: Go maps do not shrink
	inserts   uint64
	inserted  uint64
	hits      uint64
	evictions uint64
	refused   uint64
}

// New returns an empty index for model.
func New(model string, cfg Config) (*Index, error) {
	h, err := NewHasher(model, cfg.BlockSize, cfg.MaxBlocks)
	if err != nil {
		return nil, err
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Capacity < 1 || cfg.Capacity > 1<<30/MaxReplicas {
		return nil, fmt.Errorf("prefix: model %q: capacity %d out of range 1..%d", model, cfg.Capacity, 1<<30/MaxReplicas)
	}
	return &Index{
		model:     model,
		hasher:    h,
		capacity:  cfg.Capacity,
		byHash:    make(map[uint64]int32),
		freeEntry: none,
		freeNode:  none,
		slots:     make(map[string]int),
	}, nil
}

// Model is the model the index was made for.
func (x *Index) Model() string { return x.model }

// Hasher is the index's hasher, seeded with its model.
func (x *Index) Hasher() Hasher { return x.hasher }

// Hash appends the block hashes of msgs to dst; see Hasher.Append.
func (x *Index) Hash(dst []uint64, msgs []api.Message) []uint64 {
	return x.hasher.Append(dst, msgs)
}

// Match appends to dst, for each of candidates in order, the number of
// leading blocks of hashes that replica holds: its predicted cache hit, in
// blocks. A replica the index does not know holds none. The walk stops at
// the first block no candidate holds, so a cold prompt costs one lookup
// and a warm one a lookup per matched block, whatever the number of
// candidates.
func (x *Index) Match(dst []int, hashes []uint64, candidates []string) []int {
	x.lookups.Add(1)
	base := len(dst)
	var want slotSet
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, c := range candidates {
		s, ok := x.slots[c]
		if !ok {
			s = -1
		} else {
			want.add(s)
		}
		dst = append(dst, s) // the slot for now; its depth below
	}
	if want.empty() {
		for i := base; i < len(dst); i++ {
			dst[i] = 0
		}
		return dst
	}
	// depth[s] is where slot s stopped matching; a slot still alive after
	// the walk matched all of it.
	var depth [MaxReplicas]int32
	alive := want
	i := 0
	for ; i < len(hashes); i++ {
		e, ok := x.byHash[hashes[i]]
		if !ok {
			break
		}
		next := alive
		more := next.and(&x.entries[e].mask)
		if next != alive {
			for w := range words {
				for d := alive[w] &^ next[w]; d != 0; d &= d - 1 {
					depth[w*64+bits.TrailingZeros64(d)] = int32(i)
				}
			}
			alive = next
		}
		if !more {
			break // every candidate stopped here
		}
	}
	for w := range words {
		for d := alive[w]; d != 0; d &= d - 1 {
			depth[w*64+bits.TrailingZeros64(d)] = int32(i)
		}
	}
	for j := base; j < len(dst); j++ {
		if s := dst[j]; s >= 0 {
			dst[j] = int(depth[s])
		} else {
			dst[j] = 0
		}
	}
	return dst
}

// Insert records that the prompt whose block hashes are hashes was sent to
// replica: every block becomes the replica's most recently used, the first
// block most of all, so that eviction trims chains from their tails. The
// replica's least recently used blocks are evicted beyond its capacity.
// Hashes beyond MaxBlocks are ignored, which keeps the bound whatever the
// caller passes.
//
// Insert returns how many leading blocks the replica held before: the
// predicted hit of the decision, the figure to log or export. It fails
// only when the replica is new and MaxReplicas replicas are tracked.
func (x *Index) Insert(replica string, hashes []uint64) (int, error) {
	if len(hashes) > x.hasher.maxBlocks {
		hashes = hashes[:x.hasher.maxBlocks]
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slots[replica]
	if !ok {
		if s = x.newSlot(replica); s < 0 {
			x.refused++
			return 0, fmt.Errorf("prefix: model %q: cannot track replica %q: all %d slots in use", x.model, replica, MaxReplicas)
		}
	}
	r := &x.reps[s]
	// Walk from the last block back, pushing each to the front of the
	// list: the first block ends up the most recent. Evicting only after
	// the walk keeps this prompt's held blocks from being evicted to make
	// room for its new ones.
	hit := len(hashes)
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		e, ok := x.byHash[h]
		if !ok {
			e = x.newEntry(h)
		} else if x.entries[e].mask.has(s) {
			x.toFront(r, x.holder(e, s))
			continue
		}
		hit = i
		x.hold(r, s, e)
	}
	for r.blocks > x.capacity {
		x.evict(r, s)
	}
	x.inserts++
	x.inserted += uint64(len(hashes))
	x.hits += uint64(hit)
	r.inserts++
	r.inserted += uint64(len(hashes))
	r.hits += uint64(hit)
	return hit, nil
}

// Remove forgets replica and everything it held, freeing its slot for
// another. Call it when a replica leaves the set, and when it restarts
// (its cache is then empty). It reports whether the replica was tracked.
func (x *Index) Remove(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slots[name]
	if !ok {
		return false
	}
	r := &x.reps[s]
	for n := r.head; n != none; {
		next := x.nodes[n].next
		x.release(n, s)
		n = next
	}
	x.reps[s] = replica{}
	delete(x.slots, name)
	return true
}

// newSlot gives replica the lowest free slot, or returns -1.
func (x *Index) newSlot(name string) int {
	for s := range x.reps {
		if !x.reps[s].live {
			x.reps[s] = replica{name: name, live: true, head: none, tail: none}
			x.slots[name] = s
			return s
		}
	}
	return -1
}

// newEntry adds hash to the block table, held by no one yet.
func (x *Index) newEntry(h uint64) int32 {
	e := x.freeEntry
	if e != none {
		x.freeEntry = x.entries[e].pairs
		x.entries[e] = entry{hash: h, pairs: none}
	} else {
		e = int32(len(x.entries))
		x.entries = append(x.entries, entry{hash: h, pairs: none})
	}
	x.byHash[h] = e
	x.peak = max(x.peak, len(x.byHash))
	return e
}

// holder finds the node by which slot s holds entry e.
func (x *Index) holder(e int32, s int) int32 {
	n := x.entries[e].pairs
	for x.nodes[n].slot != uint8(s) {
		n = x.nodes[n].sib
	}
	return n
}

// hold makes slot s (replica r) hold entry e, as its most recent block.
func (x *Index) hold(r *replica, s int, e int32) {
	n := x.freeNode
	nd := node{entry: e, prev: none, next: r.head, sib: x.entries[e].pairs, slot: uint8(s)}
	if n != none {
		x.freeNode = x.nodes[n].next
		x.nodes[n] = nd
	} else {
		n = int32(len(x.nodes))
		x.nodes = append(x.nodes, nd)
	}
	x.entries[e].pairs = n
	x.entries[e].mask.add(s)
	if r.head != none {
		x.nodes[r.head].prev = n
	} else {
		r.tail = n
	}
	r.head = n
	r.blocks++
}

// toFront makes node n the most recent of replica r.
func (x *Index) toFront(r *replica, n int32) {
	if r.head == n {
		return
	}
	nd := &x.nodes[n]
	x.nodes[nd.prev].next = nd.next // n is not the head, so it has a prev
	if nd.next != none {
		x.nodes[nd.next].prev = nd.prev
	} else {
		r.tail = nd.prev
	}
	nd.prev, nd.next = none, r.head
	x.nodes[r.head].prev = n
	r.head = n
}

// evict drops the least recently used block of replica r (slot s).
func (x *Index) evict(r *replica, s int) {
	n := r.tail
	r.tail = x.nodes[n].prev
	if r.tail != none {
		x.nodes[r.tail].next = none
	} else {
		r.head = none
	}
	r.blocks--
	x.evictions++
	x.release(n, s)
}

// release detaches node n (of slot s) from its block, drops the block when
// no one holds it any more, and frees the node. It leaves the replica's
// list to the caller.
func (x *Index) release(n int32, s int) {
	e := x.nodes[n].entry
	en := &x.entries[e]
	if en.pairs == n {
		en.pairs = x.nodes[n].sib
	} else {
		p := en.pairs
		for x.nodes[p].sib != n {
			p = x.nodes[p].sib
		}
		x.nodes[p].sib = x.nodes[n].sib
	}
	en.mask.del(s)
	if en.mask.empty() {
		delete(x.byHash, en.hash)
		en.pairs = x.freeEntry
		x.freeEntry = e
	}
	x.nodes[n] = node{next: x.freeNode}
	x.freeNode = n
}

// Stats is a snapshot of an index, for operators.
type Stats struct {
	Model     string
	BlockSize int
	Capacity  int // blocks per replica
	// Blocks is the number of distinct block hashes held by any replica.
	Blocks int
	// MemoryBytes estimates the index's heap: its arenas at their current
	// capacity and its map at its peak size (Go maps do not shrink).
	MemoryBytes int64
	// Lookups counts Match calls.
	Lookups uint64
	// Inserts counts Insert calls; InsertedBlocks the blocks they carried;
	// HitBlocks the leading blocks the chosen replica already held.
	// HitBlocks/InsertedBlocks is the predicted hit rate of the decisions.
	Inserts        uint64
	InsertedBlocks uint64
	HitBlocks      uint64
	// Evictions counts blocks dropped from a replica for capacity.
	Evictions uint64
	// Refused counts Inserts refused because MaxReplicas were tracked.
	Refused  uint64
	Replicas []ReplicaStats
}

// ReplicaStats is the part of Stats about one replica. Its counters start
// when the replica is first inserted and vanish when it is removed.
type ReplicaStats struct {
	Replica        string
	Blocks         int
	Inserts        uint64
	InsertedBlocks uint64
	HitBlocks      uint64
}

// HitRate is the predicted share of prompt blocks found cached on the
// replicas chosen, 0 when nothing was inserted.
func (s Stats) HitRate() float64 {
	if s.InsertedBlocks == 0 {
		return 0
	}
	return float64(s.HitBlocks) / float64(s.InsertedBlocks)
}

// HitRate is the predicted share of prompt blocks found cached on this
// replica when it was chosen.
func (r ReplicaStats) HitRate() float64 {
	if r.InsertedBlocks == 0 {
		return 0
	}
	return float64(r.HitBlocks) / float64(r.InsertedBlocks)
}

// mapSlotBytes estimates the cost of one map element: Go's swiss tables
// store a 16-byte slot (uint64 key, int32 value, padding) and a control
// byte per slot, fill groups to at most 7/8, and double when full, so a
// table is between 7/16 and 7/8 full.
const mapSlotBytes = (16 + 1) * 8 / 7 * 3 / 2

// Stats returns a snapshot, replicas in slot order.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	st := Stats{
		Model:          x.model,
		BlockSize:      x.hasher.blockSize,
		Capacity:       x.capacity,
		Blocks:         len(x.byHash),
		Lookups:        x.lookups.Load(),
		Inserts:        x.inserts,
		InsertedBlocks: x.inserted,
		HitBlocks:      x.hits,
		Evictions:      x.evictions,
		Refused:        x.refused,
		MemoryBytes: int64(cap(x.entries))*int64(unsafe.Sizeof(entry{})) +
			int64(cap(x.nodes))*int64(unsafe.Sizeof(node{})) +
			int64(x.peak)*mapSlotBytes +
			int64(unsafe.Sizeof(*x)),
		Replicas: make([]ReplicaStats, 0, len(x.slots)),
	}
	for s := range x.reps {
		r := &x.reps[s]
		if !r.live {
			continue
		}
		st.Replicas = append(st.Replicas, ReplicaStats{
			Replica:        r.name,
			Blocks:         r.blocks,
			Inserts:        r.inserts,
			InsertedBlocks: r.inserted,
			HitBlocks:      r.hits,
		})
	}
	return st
}
