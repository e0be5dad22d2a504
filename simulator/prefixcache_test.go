package simulator

import (
	"testing"

	"github.com/llmedge/llmedge/api"
)

// userBlocks returns the blocks of size 4 of a one-message prompt of n
// words starting at word offset off, and its token count.
func userBlocks(off, n int) ([]uint64, int) {
	return promptBlocks(nil, []api.Message{{Role: "user", Content: wordsText(off, n)}}, 4)
}

// check verifies the LRU list against the index: every indexed block is
// on the list once, in a consistent doubly linked cycle.
func (c *prefixCache) check(t *testing.T) {
	t.Helper()
	seen := 0
	for n, prev := c.nodes[0].next, int32(0); n != 0; prev, n = n, c.nodes[n].next {
		if c.nodes[n].prev != prev {
			t.Fatalf("node %d: prev %d, want %d", n, c.nodes[n].prev, prev)
		}
		if c.index[c.nodes[n].hash] != n {
			t.Fatalf("node %d is listed but not indexed", n)
		}
		if seen++; seen > len(c.index) {
			t.Fatalf("the list is longer than the index (%d)", len(c.index))
		}
	}
	if seen != len(c.index) {
		t.Fatalf("%d blocks listed, %d indexed", seen, len(c.index))
	}
	if len(c.index) > c.capacity {
		t.Fatalf("%d blocks cached, capacity %d", len(c.index), c.capacity)
	}
}

func TestPrefixCacheLookup(t *testing.T) {
	a, na := userBlocks(0, 29) // 33 tokens: 8 blocks of 4
	if len(a) != 8 {
		t.Fatalf("%d blocks", len(a))
	}
	other, _ := userBlocks(1, 29)
	tests := []struct {
		name   string
		blocks []uint64
		tokens int
		want   int
	}{
		{"same prompt: all but the last token's block", a, na, 32},
		{"exact multiple: the last block is computed again", a, 32, 28},
		{"longer prompt with the same start", append(a[:8:8], 1, 2, 3), 60, 32},
		{"shorter prompt", a[:3], 13, 12},
		{"other prompt", other, na, 0},
		{"first block differs", append([]uint64{42}, a[1:]...), na, 0},
		{"middle block differs: the leading run", append(append(a[:2:2], 42), a[3:]...), na, 8},
		{"one token", nil, 1, 0},
	}
	c := newPrefixCache(4, 100)
	c.insert(a, 4)
	c.check(t)
	var queries, hits int64
	for _, tt := range tests {
		if got := c.lookup(tt.blocks, 4, tt.tokens); got != tt.want {
			t.Errorf("%s: %d cached tokens, want %d", tt.name, got, tt.want)
		}
		queries += int64(tt.tokens)
		hits += int64(tt.want)
	}
	if st := c.stats(); st.queries != queries || st.hits != hits || st.blocks != 8 {
		t.Errorf("stats %+v, want %d queries %d hits 8 blocks", st, queries, hits)
	}
	if got := c.lookup(a, 8, na); got != 0 {
		t.Errorf("blocks of another size matched %d tokens", got)
	}
}

func TestPrefixCacheLRU(t *testing.T) {
	const capacity = 20
	c := newPrefixCache(4, capacity)
	p := make([][]uint64, 6)
	for i := range p {
		p[i], _ = userBlocks(100*i, 25) // 29 tokens: 7 blocks
	}
	hit := func(i int) int { return c.lookup(p[i], 4, 29) / 4 }

	for i := range p {
		c.insert(p[i], 4)
		c.check(t)
		if n := hit(i); n != 7 {
			t.Fatalf("prompt %d just inserted: %d blocks hit", i, n)
		}
	}
	// 42 blocks went into 20: prompts 3-5 hold 7+7+6 and prompt 3 lost
	// its tail first.
	if n := hit(0); n != 0 {
		t.Errorf("oldest prompt: %d blocks still hit", n)
	}
	if n := hit(3); n != 6 {
		t.Errorf("prompt 3: %d blocks hit, want its head of 6", n)
	}

	// Using prompt 3 again makes it the most recent: prompt 4 goes next.
	c.insert(p[3], 4)
	c.insert(p[0], 4)
	c.check(t)
	if hit(0) != 7 || hit(3) != 7 || hit(5) != 6 || hit(4) != 0 {
		t.Errorf("after touching 3 and adding 0: hits 0:%d 3:%d 4:%d 5:%d, want 7 7 0 6", hit(0), hit(3), hit(4), hit(5))
	}

	// A prompt larger than the cache keeps its head.
	big, _ := userBlocks(999, 200)
	c.insert(big, 4)
	c.check(t)
	if n := c.lookup(big, 4, 204) / 4; n != capacity {
		t.Errorf("oversized prompt: %d blocks hit, want the first %d", n, capacity)
	}
}

func TestPrefixCacheConfigure(t *testing.T) {
	c := newPrefixCache(4, 30)
	a, na := userBlocks(0, 60) // 64 tokens: 16 blocks
	b, _ := userBlocks(7, 40)  // 44 tokens: 11 blocks
	c.insert(a, 4)
	c.insert(b, 4)

	c.configure(4, 10) // shrink: b, the most recent, keeps its head
	c.check(t)
	if st := c.stats(); st.blocks != 10 {
		t.Errorf("%d blocks after shrinking to 10", st.blocks)
	}
	if got := c.lookup(b, 4, 44); got != 40 {
		t.Errorf("after shrinking: %d tokens of the recent prompt hit, want 40", got)
	}
	c.configure(4, 30) // grow again: reuses the freed nodes
	c.insert(a, 4)
	c.check(t)
	if got := c.lookup(a, 4, na); got != 60 {
		t.Errorf("after growing: %d tokens hit, want 60", got)
	}
	if len(c.nodes) > 31 {
		t.Errorf("%d nodes for 30 blocks: the freed ones were not reused", len(c.nodes)-1)
	}

	c.configure(8, 30) // a new block size empties the cache
	c.check(t)
	if st := c.stats(); st.blocks != 0 {
		t.Errorf("%d blocks after changing the block size", st.blocks)
	}
	c.insert(a, 4) // hashed with the old size: ignored
	if st := c.stats(); st.blocks != 0 {
		t.Errorf("blocks of the old size were inserted")
	}

	a8, n8 := promptBlocks(nil, []api.Message{{Role: "user", Content: wordsText(0, 60)}}, 8)
	c.insert(a8, 8)
	c.reset()
	c.check(t)
	if st := c.stats(); st != (cacheStats{}) {
		t.Errorf("stats after reset %+v", st)
	}
	if got := c.lookup(a8, 8, n8); got != 0 {
		t.Errorf("%d tokens hit after reset", got)
	}
}
