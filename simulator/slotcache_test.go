package simulator

import "testing"

func TestSlotCache(t *testing.T) {
	a, na := userBlocks(0, 29) // 33 tokens: 8 blocks of 4
	b, _ := userBlocks(1, 29)
	longer := append(a[:8:8], 1, 2)

	c := newSlotCache(4, 2)
	// Empty slots: the first is taken, nothing hit.
	s0, hit := c.acquire(a, 4, na)
	if s0 != 0 || hit != 0 {
		t.Fatalf("cold: slot %d hit %d", s0, hit)
	}
	// While slot 0 runs, another request gets slot 1, even with the same
	// prompt: a slot serves one sequence.
	s1, hit := c.acquire(a, 4, na)
	if s1 != 1 || hit != 0 {
		t.Fatalf("second: slot %d hit %d", s1, hit)
	}
	// All in use: no slot, no hit.
	if s, hit := c.acquire(a, 4, na); s != -1 || hit != 0 {
		t.Fatalf("third: slot %d hit %d, want none", s, hit)
	}
	c.store(s0, a, 4)
	c.release(s0)
	c.store(s1, b, 4)
	c.release(s1)
	if st := c.stats(); st.blocks != 16 {
		t.Errorf("%d blocks held, want 16", st.blocks)
	}

	tests := []struct {
		name   string
		blocks []uint64
		tokens int
		slot   int
		hit    int
	}{
		{"the slot with A, all but the last token's block", a, na, 0, 32},
		{"an exact multiple computes its last block again", a, 32, 0, 28},
		{"a longer prompt: all of A", longer, 42, 0, 32},
		{"B's slot", b, na, 1, 32},
		{"no match: the first slot on a tie", []uint64{42}, 8, 0, 0},
	}
	for _, tt := range tests {
		c.reset()
		c.store(0, a, 4)
		c.store(1, b, 4)
		s, hit := c.acquire(tt.blocks, 4, tt.tokens)
		if s != tt.slot || hit != tt.hit {
			t.Errorf("%s: slot %d hit %d, want %d and %d", tt.name, s, hit, tt.slot, tt.hit)
		}
		c.release(s)
	}

	// A prefill cut short (no store) leaves the slot with the shared
	// prefix only: A's first 2 blocks, then another prompt.
	c.reset()
	c.store(0, a, 4)
	c.store(1, b, 4)
	cut := append(a[:2:2], 7, 7, 7)
	s, _ := c.acquire(cut, 4, 20)
	c.release(s)
	if s, hit := c.acquire(a, 4, na); s != 0 || hit != 8 {
		t.Errorf("after a cut prefill: slot %d hit %d, want slot 0 and 8", s, hit)
	}
	c.release(0)

	// Fewer slots: the ones beyond are no longer chosen, but one still
	// held can be stored and released.
	c.reset()
	s0, _ = c.acquire(a, 4, na)
	s1, _ = c.acquire(b, 4, na)
	c.configure(4, 1)
	c.store(s1, b, 4)
	c.release(s1)
	c.store(s0, a, 4)
	c.release(s0)
	if s, hit := c.acquire(b, 4, na); s != 0 || hit != 0 {
		t.Errorf("one slot left: slot %d hit %d, want slot 0 (holding A) and 0", s, hit)
	}
	c.release(0)
	// A new block size empties the slots; the old one's hashes are ignored.
	c.configure(8, 1)
	if st := c.stats(); st.blocks != 0 {
		t.Errorf("%d blocks after a new block size", st.blocks)
	}
	if s, hit := c.acquire(a, 4, na); s != -1 || hit != 0 {
		t.Errorf("old block size: slot %d hit %d", s, hit)
	}
	// Since the reset: three lookups counted, none of them a hit; the
	// last one was not counted.
	if st := c.stats(); st.queries != 3*int64(na) || st.hits != 0 {
		t.Errorf("counters %+v since the reset", st)
	}
}
