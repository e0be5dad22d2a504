package prefix

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/llmedge/llmedge/api"
)

func mustIndex(t testing.TB, model string, cfg Config) *Index {
	t.Helper()
	x, err := New(model, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func mustInsert(t testing.TB, x *Index, replica string, hashes []uint64) int {
	t.Helper()
	hit, err := x.Insert(replica, hashes)
	if err != nil {
		t.Fatal(err)
	}
	return hit
}

// check verifies every invariant of the index's structure, including,
// when the index only ever got chains from a Hasher, that every block is
// in one segment and every segment is in the map.
func check(t testing.TB, x *Index) {
	t.Helper()
	checkIndex(t, x, true)
}

func checkIndex(t testing.TB, x *Index, chains bool) {
	t.Helper()
	x.mu.RLock()
	defer x.mu.RUnlock()
	live, held := 0, 0
	for s := range x.reps {
		r := &x.reps[s]
		if !r.live {
			if *r != (replica{}) {
				t.Fatalf("free slot %d is not zero", s)
			}
			continue
		}
		live++
		if x.slots[r.name] != s {
			t.Fatalf("slot %d (%s) not in the name map", s, r.name)
		}
		n, prev, blocks := r.head, int32(none), 0
		for n != none {
			nd := x.nodes[n]
			if nd.prev != prev || int(nd.slot) != s || !x.segs[nd.seg].holders.has(s) {
				t.Fatalf("slot %d: node %d inconsistent: %+v (prev should be %d)", s, n, nd, prev)
			}
			blocks += len(x.segs[nd.seg].run)
			prev, n = n, nd.next
			held++
		}
		if r.tail != prev || blocks != r.blocks || blocks > x.capacity {
			t.Fatalf("slot %d: tail %d (want %d), %d blocks listed, %d counted, capacity %d", s, r.tail, prev, blocks, r.blocks, x.capacity)
		}
	}
	if live != len(x.slots) {
		t.Fatalf("%d live slots, %d names", live, len(x.slots))
	}
	holders, segs, blocks, runBytes := 0, 0, 0, int64(0)
	seen := make(map[uint64]int32)
	for si := range x.segs {
		sg := &x.segs[si]
		if len(sg.run) == 0 {
			if !sg.holders.empty() {
				t.Fatalf("free segment %d has holders", si)
			}
			continue
		}
		segs++
		blocks += len(sg.run)
		runBytes += int64(cap(sg.run)) * 8
		if 2*len(sg.run) < cap(sg.run) && len(sg.run) > 1 {
			t.Fatalf("segment %d: %d blocks pin an array of %d", si, len(sg.run), cap(sg.run))
		}
		var found slotSet
		for n := sg.nodes; n != none; n = x.nodes[n].sib {
			nd := x.nodes[n]
			if nd.seg != int32(si) || found.has(int(nd.slot)) || !x.reps[nd.slot].live {
				t.Fatalf("segment %d: holder %d inconsistent: %+v", si, n, nd)
			}
			found.add(int(nd.slot))
			holders++
		}
		if found != sg.holders || found.empty() {
			t.Fatalf("segment %d: holders %x, nodes of %x", si, sg.holders, found)
		}
		if !chains {
			continue
		}
		if x.byFirst[sg.run[0]] != int32(si) {
			t.Fatalf("segment %d is not in the map under its first hash", si)
		}
		for _, h := range sg.run {
			if other, dup := seen[h]; dup {
				t.Fatalf("a block is in segments %d and %d", other, si)
			}
			seen[h] = int32(si)
		}
	}
	if holders != held {
		t.Fatalf("%d holders in the segments, %d nodes in the lists", holders, held)
	}
	if segs != x.nsegs || blocks != x.blocks || runBytes != x.runBytes {
		t.Fatalf("counted %d segments, %d blocks, %d run bytes; the index says %d, %d, %d", segs, blocks, runBytes, x.nsegs, x.blocks, x.runBytes)
	}
	if chains && len(x.byFirst) != segs {
		t.Fatalf("%d segments, %d in the map", segs, len(x.byFirst))
	}
	for h, si := range x.byFirst {
		if run := x.segs[si].run; len(run) == 0 || run[0] != h {
			t.Fatalf("the map sends %x to segment %d, which does not start with it", h, si)
		}
	}
	free := 0
	for si := x.freeSeg; si != none; si = x.segs[si].nodes {
		free++
	}
	if free+segs != len(x.segs) {
		t.Fatalf("%d free + %d used segments, %d in the arena", free, segs, len(x.segs))
	}
	free = 0
	for n := x.freeNode; n != none; n = x.nodes[n].next {
		free++
	}
	if free+held != len(x.nodes) {
		t.Fatalf("%d free + %d used nodes, %d in the arena", free, held, len(x.nodes))
	}
}

func match(x *Index, hashes []uint64, candidates ...string) []int {
	return x.Match(nil, hashes, candidates)
}

func TestMultiTurn(t *testing.T) {
	for _, c := range []struct {
		name           string
		blockSize      int
		turns, perTurn int
		size           int // bytes per message
	}{
		{"short messages", 64, 6, 2, 40},
		{"long messages", 64, 5, 2, 3000},
		{"several messages per turn", 64, 4, 3, 500},
		{"small blocks", 4, 5, 2, 100},
		{"block per message", 1024, 6, 2, 900},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := mustIndex(t, "m", Config{BlockSize: c.blockSize})
			// Two conversations, each on its own replica, turn by turn;
			// r2 never gets one.
			convs := [][]api.Message{
				conversation(uint64(len(c.name)), 1+c.turns*c.perTurn, c.size),
				conversation(uint64(len(c.name))+100, 1+c.turns*c.perTurn, c.size),
			}
			convs[1][0].Content = "B" + convs[1][0].Content[1:]
			last := make([][]uint64, len(convs)) // what each replica was last sent
			for turn := 1; turn <= c.turns; turn++ {
				for k, full := range convs {
					replica := fmt.Sprintf("r%d", k)
					prev := x.Hash(nil, full[:1+(turn-1)*c.perTurn])
					cur := x.Hash(nil, full[:1+turn*c.perTurn])
					if turn > 1 {
						got := match(x, cur, "r0", "r1", "r2", "unknown")
						want := []int{0, 0, 0, 0}
						want[k] = len(prev) // every full block sent last turn, and no further
						// The other conversation shares the role header
						// of the system message, nothing more.
						want[1-k] = firstDiff(cur, last[1-k])
						if want[1-k]*c.blockSize > len("system\xff\x01") {
							t.Fatalf("the conversations share %d blocks", want[1-k])
						}
						if !slices.Equal(got, want) {
							t.Fatalf("turn %d, conversation %d: matched %v, want %v (of %d blocks)", turn, k, got, want, len(cur))
						}
					}
					wantHit := len(prev)
					if turn == 1 {
						wantHit = 0 // the system prompt alone was never sent
					}
					if hit := mustInsert(t, x, replica, cur); hit != wantHit {
						t.Fatalf("turn %d: Insert says %d blocks hit, want %d", turn, hit, wantHit)
					}
					if hit := mustInsert(t, x, replica, cur); hit != len(cur) {
						t.Fatalf("turn %d: Insert again says %d blocks hit, want %d", turn, hit, len(cur))
					}
					last[k] = cur
					check(t, x)
				}
			}
		})
	}
}

// A shared system prompt matches only its own blocks: the key is the
// whole chain, not the system prompt.
func TestSharedSystemPrompt(t *testing.T) {
	sys := text(10, 2000)
	for _, c := range []struct {
		name   string
		a, b   string // the user messages
		common int    // bytes the contents share
	}{
		{"different questions", "What is a KV cache? " + text(13, 500), "Summarize this contract. " + text(14, 500), 0},
		{"same document, different question", strings.Repeat("doc ", 300) + "Q1 " + text(15, 300), strings.Repeat("doc ", 300) + "Q2 " + text(16, 300), 1201},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := mustIndex(t, "m", Config{})
			a := x.Hash(nil, msgs(api.RoleSystem, sys, api.RoleUser, c.a))
			b := x.Hash(nil, msgs(api.RoleSystem, sys, api.RoleUser, c.b))
			mustInsert(t, x, "r0", a)
			// The rendering up to the first differing byte: the system
			// message, the user role and the common start of the contents.
			shared := (len(render(msgs(api.RoleSystem, sys))) + len("user\xff\x01") + c.common) / x.Hasher().BlockSize()
			got := match(x, b, "r0", "r1")
			if got[0] != shared || got[1] != 0 {
				t.Fatalf("matched %v, want [%d 0]", got, shared)
			}
			if got[0] >= len(b) {
				t.Fatalf("the whole prompt matched: the key is only the shared part")
			}
		})
	}
}

func TestSameContentAfterDifferentPrefix(t *testing.T) {
	x := mustIndex(t, "m", Config{})
	doc := text(11, 8000)
	a := x.Hash(nil, msgs(api.RoleSystem, "You are helpful.", api.RoleUser, doc))
	b := x.Hash(nil, msgs(api.RoleSystem, "You are terse.", api.RoleUser, doc))
	c := x.Hash(nil, msgs(api.RoleUser, doc))
	mustInsert(t, x, "r0", a)
	for _, h := range [][]uint64{b, c} {
		if got := match(x, h, "r0"); got[0] != 0 {
			t.Fatalf("matched %d blocks after a different prefix", got[0])
		}
	}
}

func TestModelsAreSeparate(t *testing.T) {
	a := mustIndex(t, "model-a", Config{})
	b := mustIndex(t, "model-b", Config{})
	m := conversation(12, 5, 1000)
	mustInsert(t, a, "r0", a.Hash(nil, m))
	if got := match(a, b.Hash(nil, m), "r0"); got[0] != 0 {
		t.Fatalf("model b's hashes matched %d blocks of model a's index", got[0])
	}
	if got := match(a, a.Hash(nil, m), "r0"); got[0] == 0 {
		t.Fatalf("model a's own prompt did not match")
	}
}

func TestMatchEdges(t *testing.T) {
	x := mustIndex(t, "m", Config{BlockSize: 1})
	h := x.Hash(nil, msgs("user", "abcdefgh"))
	mustInsert(t, x, "r0", h[:4])
	mustInsert(t, x, "r1", h)
	mustInsert(t, x, "r2", h[:6])
	for _, c := range []struct {
		hashes     []uint64
		candidates []string
		want       []int
	}{
		{h, []string{"r0", "r1", "r2", "r3"}, []int{4, len(h), 6, 0}},
		{h, []string{"r2", "r2", "r0"}, []int{6, 6, 4}},
		{h, nil, []int{}},
		{nil, []string{"r0", "r1"}, []int{0, 0}},
		{[]uint64{h[0], h[1], 12345}, []string{"r1"}, []int{2}},
	} {
		dst := []int{-7}
		got := x.Match(dst, c.hashes, c.candidates)
		if got[0] != -7 || !slices.Equal(got[1:], c.want) {
			t.Errorf("Match(%d hashes, %v) = %v, want [-7 %v...]", len(c.hashes), c.candidates, got, c.want)
		}
	}
	if st := x.Stats(); st.Lookups != 5 {
		t.Errorf("Lookups = %d, want 5", st.Lookups)
	}
}

// TestEviction checks the bound and the order: least recently used chains
// go first, and a chain loses its tail before its head.
func TestEviction(t *testing.T) {
	const capacity = 100
	x := mustIndex(t, "m", Config{BlockSize: 16, Capacity: capacity})
	chain := func(seed uint64, blocks int) []uint64 {
		h := x.Hash(nil, msgs("user", text(seed, blocks*16)))
		return h[:blocks] // the prompt's last blocks include the separators
	}
	a, b, c := chain(1, 40), chain(2, 40), chain(3, 40)
	mustInsert(t, x, "r", a)
	mustInsert(t, x, "r", b)
	mustInsert(t, x, "r", a) // a is now more recent than b
	mustInsert(t, x, "r", c) // 120 blocks: b loses its 20 last
	check(t, x)
	got := []int{match(x, a, "r")[0], match(x, b, "r")[0], match(x, c, "r")[0]}
	if want := []int{40, 20, 40}; !slices.Equal(got, want) {
		t.Fatalf("after eviction a, b, c match %v, want %v", got, want)
	}
	st := x.Stats()
	if st.Replicas[0].Blocks != capacity || st.Blocks != capacity || st.Evictions != 20 {
		t.Fatalf("replica holds %d blocks, index %d, %d evictions; want %d, %d, 20", st.Replicas[0].Blocks, st.Blocks, st.Evictions, capacity, capacity)
	}
	// A prompt longer than the capacity keeps its head.
	d := chain(4, 150)
	if hit := mustInsert(t, x, "r", d); hit != 0 {
		t.Fatalf("hit %d", hit)
	}
	check(t, x)
	if got := match(x, d, "r")[0]; got != capacity {
		t.Fatalf("a prompt longer than the capacity matches %d blocks, want its first %d", got, capacity)
	}
	// Blocks shared with another replica survive this one's eviction,
	// whole or in part.
	mustInsert(t, x, "s", a)
	mustInsert(t, x, "r", a)
	mustInsert(t, x, "r", chain(5, 80)) // 120 blocks: a loses 20 on r only
	check(t, x)
	if got := match(x, a, "r", "s"); !slices.Equal(got, []int{20, 40}) {
		t.Fatalf("after evicting half of a from r: %v, want [20 40]", got)
	}
	mustInsert(t, x, "r", chain(6, capacity))
	check(t, x)
	if got := match(x, a, "r", "s"); !slices.Equal(got, []int{0, 40}) {
		t.Fatalf("after evicting a from r: %v, want [0 40]", got)
	}
}

// TestSplit checks that prompts diverging inside a segment split it, and
// that every replica keeps what it held.
func TestSplit(t *testing.T) {
	x := mustIndex(t, "m", Config{})
	sys := text(30, 3000)
	a := x.Hash(nil, msgs(api.RoleSystem, sys, api.RoleUser, "A "+text(31, 2000)))
	b := x.Hash(nil, msgs(api.RoleSystem, sys, api.RoleUser, "B "+text(32, 2000)))
	c := x.Hash(nil, msgs(api.RoleSystem, sys, api.RoleUser, "A "+text(31, 1000)+"C"))
	shared := firstDiff(a, b)
	mustInsert(t, x, "r0", a)
	if st := x.Stats(); st.Segments != 1 {
		t.Fatalf("%d segments after one prompt", st.Segments)
	}
	if hit := mustInsert(t, x, "r1", b); hit != 0 {
		t.Fatalf("hit %d on a new replica", hit)
	}
	if hit := mustInsert(t, x, "r0", b); hit != shared {
		t.Fatalf("hit %d, want the shared %d", hit, shared)
	}
	mustInsert(t, x, "r2", c)
	check(t, x)
	for _, q := range []struct {
		hashes []uint64
		want   []int
	}{
		{a, []int{len(a), shared, firstDiff(a, c)}},
		{b, []int{len(b), len(b), shared}},
		{c, []int{firstDiff(a, c), shared, len(c)}},
		{a[:shared/2], []int{shared / 2, shared / 2, shared / 2}},
	} {
		if got := match(x, q.hashes, "r0", "r1", "r2"); !slices.Equal(got, q.want) {
			t.Errorf("matched %v, want %v", got, q.want)
		}
	}
	// A prompt ending inside a segment its replica holds does not split it.
	before := x.Stats().Segments
	if hit := mustInsert(t, x, "r1", b[:len(b)-3]); hit != len(b)-3 {
		t.Fatalf("hit %d", hit)
	}
	if st := x.Stats(); st.Segments != before {
		t.Fatalf("%d segments, want %d", st.Segments, before)
	}
	check(t, x)
}

// TestMemoryBound feeds far more distinct prompts than the index holds and
// checks that the structure, and the heap, stop growing.
func TestMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("fills an index to its bound")
	}
	const replicas, capacity = 8, 20000
	x := mustIndex(t, "m", Config{Capacity: capacity})
	r := rand.New(rand.NewPCG(1, 2))
	hashes := make([]uint64, 256)
	fill := func(rounds int) {
		for range rounds {
			for i := range hashes {
				hashes[i] = r.Uint64()
			}
			mustInsert(t, x, fmt.Sprintf("r%d", r.IntN(replicas)), hashes)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	fill(replicas * capacity / 256 * 3)
	check(t, x)
	st := x.Stats()
	full := heap()
	fill(replicas * capacity / 256 * 3)
	later := heap()
	st2 := x.Stats()
	for _, rs := range st2.Replicas {
		if rs.Blocks != capacity {
			t.Errorf("replica %s holds %d blocks, want %d", rs.Replica, rs.Blocks, capacity)
		}
	}
	if st2.Blocks > replicas*capacity || st2.MemoryBytes > st.MemoryBytes*11/10 {
		t.Errorf("index grew: %d blocks, estimate %d then %d bytes", st2.Blocks, st.MemoryBytes, st2.MemoryBytes)
	}
	if later > full+full/10 {
		t.Errorf("heap grew from %d to %d bytes while the index was full", full, later)
	}
	used := int64(full - before)
	perBlock := float64(used) / float64(replicas*capacity)
	t.Logf("%d replicas × %d blocks: heap %d B (%.1f B per block), estimate %d B", replicas, capacity, used, perBlock, st.MemoryBytes)
	if est := st.MemoryBytes; est < used*2/3 || est > used*3/2 {
		t.Errorf("memory estimate %d bytes, heap used %d", est, used)
	}
	runtime.KeepAlive(x)
}

// TestMemoryWorstCase measures the bytes per block when every block is a
// branch point, so every segment is one block long: all 2^16 chains of 16
// blocks over a two-letter alphabet, on one replica that holds them all.
func TestMemoryWorstCase(t *testing.T) {
	if testing.Short() {
		t.Skip("fills an index")
	}
	const depth = 16
	x := mustIndex(t, "m", Config{Capacity: 1 << 18})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	h := make([]uint64, depth)
	var buf [16]byte
	for leaf := range 1 << depth {
		parent := uint64(1)
		for i := range h {
			binary.LittleEndian.PutUint64(buf[:], parent)
			buf[8] = byte(leaf >> (depth - 1 - i) & 1)
			parent = xxhash.Sum64(buf[:])
			h[i] = parent
		}
		mustInsert(t, x, "r", h)
	}
	used := heap() - before
	st := x.Stats()
	if st.Segments != st.Blocks || st.Blocks != 1<<(depth+1)-2 {
		t.Fatalf("%d segments, %d blocks", st.Segments, st.Blocks)
	}
	perBlock := float64(used) / float64(st.Blocks)
	t.Logf("%d one-block segments: heap %d B (%.1f B per block), estimate %d B", st.Segments, used, perBlock, st.MemoryBytes)
	if perBlock > 160 {
		t.Errorf("%.1f B per block in the worst case", perBlock)
	}
	if est := st.MemoryBytes; est < int64(used)*2/3 || est > int64(used)*3/2 {
		t.Errorf("memory estimate %d bytes, heap used %d", est, used)
	}
	check(t, x)
}

func TestRemove(t *testing.T) {
	x := mustIndex(t, "m", Config{BlockSize: 8})
	a := x.Hash(nil, conversation(20, 5, 200))
	b := x.Hash(nil, conversation(21, 5, 200))
	mustInsert(t, x, "r0", a)
	mustInsert(t, x, "r1", a)
	mustInsert(t, x, "r1", b)
	if !x.Remove("r1") || x.Remove("r1") || x.Remove("never") {
		t.Fatal("Remove reports wrongly whether the replica was tracked")
	}
	check(t, x)
	st := x.Stats()
	if len(st.Replicas) != 1 || st.Replicas[0].Replica != "r0" || st.Blocks != len(a) {
		t.Fatalf("after Remove: %+v", st)
	}
	if got := match(x, a, "r0", "r1"); !slices.Equal(got, []int{len(a), 0}) {
		t.Fatalf("after Remove: %v", got)
	}
	// The freed slot goes to the next replica, which starts empty.
	mustInsert(t, x, "r2", b[:3])
	if x.slots["r2"] != 1 {
		t.Fatalf("r2 got slot %d, want the freed 1", x.slots["r2"])
	}
	if got := match(x, b, "r2"); got[0] != 3 {
		t.Fatalf("r2 matches %d, want 3", got[0])
	}
	x.Remove("r0")
	x.Remove("r2")
	check(t, x)
	if st := x.Stats(); st.Blocks != 0 || len(st.Replicas) != 0 {
		t.Fatalf("empty index: %+v", st)
	}
}

func TestSlots(t *testing.T) {
	x := mustIndex(t, "m", Config{BlockSize: 1})
	h := x.Hash(nil, msgs("u", "abc"))
	for i := range MaxReplicas {
		mustInsert(t, x, fmt.Sprintf("r%d", i), h[:1+i%len(h)])
	}
	_, err := x.Insert("one too many", h)
	if err == nil || !strings.Contains(err.Error(), `"one too many"`) {
		t.Fatalf("Insert beyond MaxReplicas: err %v", err)
	}
	if st := x.Stats(); st.Refused != 1 || len(st.Replicas) != MaxReplicas {
		t.Fatalf("Refused %d, %d replicas", st.Refused, len(st.Replicas))
	}
	all := make([]string, MaxReplicas)
	for i := range all {
		all[i] = fmt.Sprintf("r%d", i)
	}
	got := x.Match(nil, h, all)
	for i, n := range got {
		if n != 1+i%len(h) {
			t.Fatalf("replica %d matches %d, want %d", i, n, 1+i%len(h))
		}
	}
	x.Remove("r77")
	if hit := mustInsert(t, x, "one too many", h); hit != 0 {
		t.Fatalf("new replica hit %d", hit)
	}
	check(t, x)
}

func TestStats(t *testing.T) {
	x := mustIndex(t, "m", Config{BlockSize: 1, Capacity: 1000})
	h := x.Hash(nil, msgs("u", "abcdefgh")) // 13 blocks: u, 2 separators, 8 letters, 2 separators
	mustInsert(t, x, "r0", h[:10])
	mustInsert(t, x, "r0", h)     // 10 hit of 13
	mustInsert(t, x, "r1", h[:4]) // 0 hit of 4
	st := x.Stats()
	if len(h) != 13 || st.Inserts != 3 || st.InsertedBlocks != 27 || st.HitBlocks != 10 || st.Blocks != len(h) {
		t.Fatalf("%d hashes, %+v", len(h), st)
	}
	if st.HitRate() != 10.0/27 || st.Replicas[0].HitRate() != 10.0/23 || st.Replicas[1].HitRate() != 0 {
		t.Fatalf("hit rates %v %v %v", st.HitRate(), st.Replicas[0].HitRate(), st.Replicas[1].HitRate())
	}
	if (Stats{}).HitRate() != 0 || (ReplicaStats{}).HitRate() != 0 {
		t.Fatal("hit rate of nothing is not 0")
	}
	if st.Model != "m" || st.BlockSize != 1 || st.Capacity != 1000 || st.MemoryBytes <= 0 {
		t.Fatalf("%+v", st)
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{{BlockSize: -1}, {MaxBlocks: -1}, {Capacity: -1}, {Capacity: 1 << 30}} {
		if _, err := New("m", cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	x := mustIndex(t, "m", Config{})
	if x.capacity != DefaultCapacity || x.Model() != "m" {
		t.Fatalf("defaults: capacity %d, model %q", x.capacity, x.Model())
	}
	// Insert ignores hashes beyond MaxBlocks.
	y := mustIndex(t, "m", Config{MaxBlocks: 3})
	if hit := mustInsert(t, y, "r", []uint64{1, 2, 3, 4, 5}); hit != 0 || y.Stats().Blocks != 3 {
		t.Fatalf("hit %d, %d blocks", hit, y.Stats().Blocks)
	}
}

// TestConcurrent runs decisions, removals and stats from many goroutines;
// run it with -race. Its invariants are checked at the end.
func TestConcurrent(t *testing.T) {
	x := mustIndex(t, "m", Config{BlockSize: 16, Capacity: 500})
	replicas := []string{"a", "b", "c", "d", "e"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 0))
			var buf []uint64
			var got []int
			for i := range 300 {
				m := conversation(uint64(r.IntN(20)), 1+r.IntN(6), 100)
				buf = x.Hash(buf[:0], m)
				got = x.Match(got[:0], buf, replicas)
				best := 0
				for j := range got {
					if got[j] > got[best] {
						best = j
					}
				}
				if _, err := x.Insert(replicas[best], buf); err != nil {
					t.Error(err)
					return
				}
				switch {
				case g == 0 && i%50 == 0:
					x.Remove(replicas[r.IntN(len(replicas))])
				case g == 1 && i%20 == 0:
					_ = x.Stats()
				}
			}
		})
	}
	wg.Wait()
	check(t, x)
	if st := x.Stats(); st.Lookups != 8*300 || st.Inserts != 8*300 {
		t.Fatalf("%d lookups, %d inserts", st.Lookups, st.Inserts)
	}
}

func TestSlotSet(t *testing.T) {
	var s slotSet
	for _, i := range []int{0, 63, 64, 127} {
		s.add(i)
	}
	if !s.has(0) || !s.has(127) || s.has(1) || s.count() != 4 {
		t.Fatalf("%x", s)
	}
	for _, i := range []int{0, 63, 64, 127} {
		s.del(i)
	}
	if !s.empty() {
		t.Fatalf("%x", s)
	}
}
