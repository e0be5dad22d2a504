package prefix

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/llmedge/llmedge/api"
)

// MaxReplicas is the number of replicas an Index tracks at once. Each
// segment carries a bitset of the replicas holding it, which is what makes
// Match cost the same whatever the number of candidates; 128 bits keep
// that bitset two words wide.
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

// The index is a radix tree over chains of block hashes, as SGLang keeps
// one over tokens. A segment is a run of consecutive blocks that the same
// replicas hold; the tree's edges are implicit, because a block's hash
// already names everything before it: the children of a segment are the
// segments whose first hash follows its last, and one map from first hash
// to segment finds any of them. Walking a prompt therefore costs one map
// lookup per segment on its path (its system prompt, then each turn of its
// conversation), not one per block, and a segment's blocks are compared
// as a run: since hashes chain, the run matches up to block j exactly when
// it matches at block j, so one comparison decides a whole segment and a
// divergence inside one is found by bisection.
//
// Each replica keeps a list of the segments it holds, most recently used
// first. Insert puts the segments of a prompt's path at the front in path
// order, so a segment is always more recent than its descendants in every
// list that holds both: the tail of a list is always a leaf for that
// replica, eviction cuts chains from their ends, and what a replica holds
// stays closed under prefixes — which is what lets Match stop at the first
// segment a candidate does not hold.

// slotSet is a set of replica slots.
type slotSet [words]uint64

func (s *slotSet) add(i int)      { s[i>>6] |= 1 << (i & 63) }
func (s *slotSet) del(i int)      { s[i>>6] &^= 1 << (i & 63) }
func (s *slotSet) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }
func (s *slotSet) empty() bool    { return s[0]|s[1] == 0 }
func (s *slotSet) count() int     { return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) }

// seg is a run of blocks and the replicas holding all of it.
type seg struct {
	run     []uint64 // the blocks' hashes in chain order; it owns its array
	holders slotSet
	nodes   int32 // first holder's node; next free segment when free
}

// node is one segment held by one replica: an element of that replica's
// LRU list, and of the segment's list of holders.
type node struct {
	seg  int32
	prev int32 // towards the most recently used
	next int32 // towards the least recently used; next free node when free
	sib  int32 // next holder of the same segment
	slot uint8
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
// lock, each for about a microsecond; hashing happens outside any lock.
type Index struct {
	model    string
	hasher   Hasher
	capacity int

	lookups atomic.Uint64

	mu       sync.RWMutex
	byFirst  map[uint64]int32
	segs     []seg
	freeSeg  int32
	nodes    []node
	freeNode int32
	slots    map[string]int
	reps     [MaxReplicas]replica
	blocks   int   // distinct blocks: the runs' total length
	nsegs    int   // live segments
	runBytes int64 // the runs' arrays
	peak     int   // most segments byFirst ever held: Go maps do not shrink

	inserts   uint64
	inserted  uint64
	hits      uint64
	evictions uint64
	refused   uint64
	learned   uint64
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
		model:    model,
		hasher:   h,
		capacity: cfg.Capacity,
		byFirst:  make(map[uint64]int32),
		freeSeg:  none,
		freeNode: none,
		slots:    make(map[string]int),
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

// HashIn appends the block hashes of msgs within a cache partition to
// dst; see Hasher.AppendIn.
func (x *Index) HashIn(dst []uint64, partition uint64, msgs []api.Message) []uint64 {
	return x.hasher.AppendIn(dst, partition, msgs)
}

// common returns how many leading hashes run and q share, knowing that
// they share the first. Chained hashes agree up to some block and differ
// from there on, so the last common position decides, and bisection finds
// a divergence. (Hashes that do not chain, which only a caller's own
// slices can be, get some position in range, never a panic.)
func common(run, q []uint64) int {
	k := min(len(run), len(q))
	if run[k-1] == q[k-1] {
		return k
	}
	lo, hi := 0, k-1 // run[lo] == q[lo], run[hi] != q[hi]
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if run[mid] == q[mid] {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// Match appends to dst, for each of candidates in order, the number of
// leading blocks of hashes that replica holds: its predicted cache hit, in
// blocks. A replica the index does not know holds none. The walk costs a
// map lookup per segment of the prompt's path and stops where the last
// candidate drops out, whatever the number of candidates.
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
	// depth[s] is where slot s stopped matching; a slot still alive after
	// the walk matched up to pos.
	var depth [MaxReplicas]int32
	alive, pos := want, 0
	for pos < len(hashes) && !alive.empty() {
		si, ok := x.byFirst[hashes[pos]]
		if !ok {
			break
		}
		sg := &x.segs[si]
		for w := range words {
			for d := alive[w] &^ sg.holders[w]; d != 0; d &= d - 1 {
				depth[w*64+bits.TrailingZeros64(d)] = int32(pos)
			}
			alive[w] &= sg.holders[w]
		}
		m := common(sg.run, hashes[pos:])
		pos += m
		if m < len(sg.run) {
			break // the prompt leaves the tree inside this segment
		}
	}
	for w := range words {
		for d := alive[w]; d != 0; d &= d - 1 {
			depth[w*64+bits.TrailingZeros64(d)] = int32(pos)
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

// Insert records that the prompt whose block hashes are hashes (a whole
// chain from Hash, or a prefix of one) was sent to replica: all its blocks
// become the replica's most recently used, the first ones most of all, so
// that eviction trims chains from their tails. The replica's least
// recently used blocks are evicted beyond its capacity. Hashes beyond
// MaxBlocks are ignored, which keeps the bound whatever the caller passes.
//
// Insert returns how many leading blocks the replica held before: the
// predicted hit of the decision, the figure to log or export. It fails
// only when the replica is new and MaxReplicas replicas are tracked.
func (x *Index) Insert(replica string, hashes []uint64) (int, error) {
	return x.insert(replica, hashes, true)
}

// Learn records, as Insert does, that the prompt of hashes went to
// replica, but as another gateway instance's decision: it counts in none
// of this index's decision figures (Stats' Inserts, InsertedBlocks,
// HitBlocks), which stay this instance's own.
func (x *Index) Learn(replica string, hashes []uint64) error {
	_, err := x.insert(replica, hashes, false)
	return err
}

func (x *Index) insert(replica string, hashes []uint64, decision bool) (int, error) {
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
	hit, held := 0, true // held: every segment so far was the replica's already
	prev := int32(none)  // the replica's node of the previous segment on the path
	for pos := 0; pos < len(hashes); {
		si, ok := x.byFirst[hashes[pos]]
		if !ok {
			// The rest of the prompt is new to every replica.
			si = x.newSeg(slices.Clone(hashes[pos:]))
			prev = x.hold(r, s, si, prev)
			held = false
			break
		}
		m := common(x.segs[si].run, hashes[pos:])
		has := x.segs[si].holders.has(s)
		// The replica gets the segment's first m blocks. Split it there
		// unless the replica holds it all already and the prompt simply
		// ends inside it.
		if m < len(x.segs[si].run) && (!has || pos+m < len(hashes)) {
			x.split(si, m)
		}
		if has {
			n := x.holder(si, s)
			if n != prev { // a caller's hashes may revisit a segment
				x.moveAfter(r, n, prev)
			}
			prev = n
		} else {
			prev = x.hold(r, s, si, prev)
		}
		if held = held && has; held {
			hit = pos + m
		}
		pos += m
	}
	for r.blocks > x.capacity {
		x.evict(r, s)
	}
	if !decision {
		x.learned++
		return hit, nil
	}
	x.inserts++
	x.inserted += uint64(len(hashes))
	x.hits += uint64(hit)
	r.inserts++
	r.inserted += uint64(len(hashes))
	r.hits += uint64(hit)
	return hit, nil
}

// Remove forgets the named replica and everything it held, freeing its
// slot for another. Call it when a replica leaves the set, and when it restarts
// (its cache is then empty). It reports whether the replica was tracked.
func (x *Index) Remove(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slots[name]
	if !ok {
		return false
	}
	for n := x.reps[s].head; n != none; {
		next := x.nodes[n].next
		x.release(n, s)
		n = next
	}
	x.reps[s] = replica{}
	delete(x.slots, name)
	return true
}

// newSlot gives name the lowest free slot, or returns -1.
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

// newSeg adds a segment held by no one yet, owning run.
func (x *Index) newSeg(run []uint64) int32 {
	si := x.freeSeg
	if si != none {
		x.freeSeg = x.segs[si].nodes
		x.segs[si] = seg{run: run, nodes: none}
	} else {
		si = int32(len(x.segs))
		x.segs = append(x.segs, seg{run: run, nodes: none})
	}
	// A first hash already taken can only come from a caller's hashes that
	// do not chain; the segment then stays out of the map, unreachable
	// but accounted for, and is evicted like any other.
	if _, taken := x.byFirst[run[0]]; !taken {
		x.byFirst[run[0]] = si
		x.peak = max(x.peak, len(x.byFirst))
	}
	x.blocks += len(run)
	x.nsegs++
	x.runBytes += int64(cap(run)) * 8
	return si
}

// split cuts segment si after its first m blocks (0 < m < len): the rest
// becomes a new segment, a child of si, held by the same replicas, each
// holding it just behind si in its list. It returns the new segment.
func (x *Index) split(si int32, m int) int32 {
	run := x.segs[si].run
	head, tail := run[:m], slices.Clone(run[m:])
	if 2*m < cap(run) {
		head = slices.Clone(head) // so that the head does not pin the tail's blocks
	}
	x.runBytes += int64(cap(head)-cap(run)) * 8
	x.blocks -= len(tail)
	x.segs[si].run = head
	ti := x.newSeg(tail)
	x.segs[ti].holders = x.segs[si].holders
	for n := x.segs[si].nodes; n != none; n = x.nodes[n].sib {
		s := int(x.nodes[n].slot)
		t := x.newNode(ti, s)
		x.link(&x.reps[s], t, n)
	}
	return ti
}

// holder finds the node by which slot s holds segment si.
func (x *Index) holder(si int32, s int) int32 {
	n := x.segs[si].nodes
	for int(x.nodes[n].slot) != s {
		n = x.nodes[n].sib
	}
	return n
}

// newNode makes slot s a holder of segment si, outside any list yet.
func (x *Index) newNode(si int32, s int) int32 {
	nd := node{seg: si, prev: none, next: none, sib: x.segs[si].nodes, slot: uint8(s)}
	n := x.freeNode
	if n != none {
		x.freeNode = x.nodes[n].next
		x.nodes[n] = nd
	} else {
		n = int32(len(x.nodes))
		x.nodes = append(x.nodes, nd)
	}
	x.segs[si].nodes = n
	x.segs[si].holders.add(s)
	return n
}

// hold makes replica r (slot s) hold segment si, placed after node prev
// (at the front when prev is none); it returns the new node.
func (x *Index) hold(r *replica, s int, si int32, prev int32) int32 {
	n := x.newNode(si, s)
	x.link(r, n, prev)
	r.blocks += len(x.segs[si].run)
	return n
}

// link inserts node n, in no list, into r's list after prev (at the front
// when prev is none).
func (x *Index) link(r *replica, n, prev int32) {
	next := r.head
	if prev != none {
		next = x.nodes[prev].next
		x.nodes[prev].next = n
	} else {
		r.head = n
	}
	if next != none {
		x.nodes[next].prev = n
	} else {
		r.tail = n
	}
	x.nodes[n].prev, x.nodes[n].next = prev, next
}

// unlink takes node n out of r's list.
func (x *Index) unlink(r *replica, n int32) {
	nd := &x.nodes[n]
	if nd.prev != none {
		x.nodes[nd.prev].next = nd.next
	} else {
		r.head = nd.next
	}
	if nd.next != none {
		x.nodes[nd.next].prev = nd.prev
	} else {
		r.tail = nd.prev
	}
	nd.prev, nd.next = none, none
}

// moveAfter moves node n of r's list right after prev (to the front when
// prev is none).
func (x *Index) moveAfter(r *replica, n, prev int32) {
	if x.nodes[n].prev == prev {
		return // in place already: the common case of a warm prompt
	}
	x.unlink(r, n)
	x.link(r, n, prev)
}

// evict drops blocks from the end of r's least recently used segment
// (slot s), at most as many as r holds beyond its capacity.
func (x *Index) evict(r *replica, s int) {
	n := r.tail
	si := x.nodes[n].seg
	excess, length := r.blocks-x.capacity, len(x.segs[si].run)
	x.evictions += uint64(min(excess, length))
	if excess < length {
		keep := length - excess
		if x.segs[si].holders.count() > 1 {
			// Others keep the whole segment: split off the part r drops;
			// r's node for it is its new tail, dropped whole below.
			x.split(si, keep)
			n = r.tail
			si = x.nodes[n].seg
		} else {
			// r alone holds it, so no one holds a child of it (a child is
			// never more recent than its parent, and this is r's least
			// recent segment): trimming loses nothing else.
			run := x.segs[si].run[:keep]
			if 2*keep < cap(run) {
				run = slices.Clone(run)
			}
			x.runBytes += int64(cap(run)-cap(x.segs[si].run)) * 8
			x.segs[si].run = run
			x.blocks -= excess
			r.blocks -= excess
			return
		}
	}
	x.unlink(r, n)
	x.release(n, s)
}

// release detaches node n (of slot s, out of its list or about to be
// discarded with it) from its segment, drops the segment when no one holds
// it any more, and frees the node.
func (x *Index) release(n int32, s int) {
	si := x.nodes[n].seg
	sg := &x.segs[si]
	if sg.nodes == n {
		sg.nodes = x.nodes[n].sib
	} else {
		p := sg.nodes
		for x.nodes[p].sib != n {
			p = x.nodes[p].sib
		}
		x.nodes[p].sib = x.nodes[n].sib
	}
	sg.holders.del(s)
	x.reps[s].blocks -= len(sg.run)
	if sg.holders.empty() {
		if cur, ok := x.byFirst[sg.run[0]]; ok && cur == si {
			delete(x.byFirst, sg.run[0])
		}
		x.blocks -= len(sg.run)
		x.nsegs--
		x.runBytes -= int64(cap(sg.run)) * 8
		*sg = seg{nodes: x.freeSeg}
		x.freeSeg = si
	}
	x.nodes[n] = node{next: x.freeNode}
	x.freeNode = n
}

// Stats is a snapshot of an index, for operators.
type Stats struct {
	Model     string
	BlockSize int
	Capacity  int // blocks per replica
	// Blocks is the number of distinct blocks held by any replica, in
	// Segments runs.
	Blocks   int
	Segments int
	// MemoryBytes estimates the index's heap: its arenas at their current
	// capacity, the runs of hashes, and its map at its peak size (Go maps
	// do not shrink).
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
	Refused uint64
	// Learned counts other instances' decisions recorded (Learn).
	Learned  uint64
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
		Blocks:         x.blocks,
		Segments:       x.nsegs,
		Lookups:        x.lookups.Load(),
		Inserts:        x.inserts,
		InsertedBlocks: x.inserted,
		HitBlocks:      x.hits,
		Evictions:      x.evictions,
		Refused:        x.refused,
		Learned:        x.learned,
		MemoryBytes: int64(cap(x.segs))*int64(unsafe.Sizeof(seg{})) +
			int64(cap(x.nodes))*int64(unsafe.Sizeof(node{})) +
			x.runBytes +
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
