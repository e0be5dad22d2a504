package simulator

import "sync"

// slotCache is Ollama's kind of prefix cache (Config.PrefixCache "slots"):
// the engine has one KV sequence per slot (OLLAMA_NUM_PARALLEL, here
// Config.MaxNumSeqs), a slot keeps the prompt it last ran, and a new
// request takes the free slot whose prompt shares the longest prefix with
// its own (the first such slot on a tie), reusing that prefix and
// replacing the rest. So a prompt from another conversation in between
// evicts a conversation's prompt from a one-slot engine (A, B, A: the
// second A misses), however small both are; and sequential requests all
// land on the first slot, as measured on Ollama v0.17 with 4 slots.
//
// Prompts are held as chained block hashes (prompt.go), Config.BlockSize
// tokens a block (1 for Ollama, whose match is token-exact). Like
// prefixCache it keeps no KV data, and only prompts: the reply a slot
// also holds in Ollama is not modelled.
type slotCache struct {
	mu        sync.Mutex
	blockSize int // tokens per block the stored hashes were cut with
	// n is the number of slots in use; slots beyond it are kept (a
	// sequence may still hold one after the count shrank) but not chosen.
	n     int
	slots []cacheSlot
	// queries and hits count prompt tokens looked up and found, as
	// prefixCache's do.
	queries, hits int64
}

type cacheSlot struct {
	blocks []uint64 // the prompt last run in the slot
	inUse  bool
}

// newSlotCache returns n empty slots (at least 1) for blocks of blockSize
// tokens.
func newSlotCache(blockSize, n int) *slotCache {
	c := &slotCache{}
	c.configure(blockSize, n)
	return c
}

// configure applies a block size and a slot count. Hashes cut with another
// block size mean nothing any more, so a new block size empties the slots.
func (c *slotCache) configure(blockSize, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if blockSize != c.blockSize {
		c.blockSize = blockSize
		c.clearLocked()
	}
	c.n = max(n, 1)
	for len(c.slots) < c.n {
		c.slots = append(c.slots, cacheSlot{})
	}
}

// clear empties the slots; the counters stay.
func (c *slotCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
}

// reset empties the slots and zeroes the counters.
func (c *slotCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.queries, c.hits = 0, 0
}

// clearLocked forgets every slot's prompt, keeping which are in use.
func (c *slotCache) clearLocked() {
	for i := range c.slots {
		c.slots[i].blocks = c.slots[i].blocks[:0]
	}
}

// acquire takes the free slot whose prompt shares the most leading blocks
// with blocks and returns it with the prompt tokens it holds: that run
// times the block size, at most tokens-1 (the last prompt token is always
// computed, for its logits, as Ollama does when a prompt repeats). The
// slot keeps only the shared prefix until store gives it the new prompt,
// so a prefill cut short leaves just that. It returns slot -1, and 0
// tokens, when every slot is in use (never with as many slots as running
// sequences) or the block size changed meanwhile. It counts the query and
// the hit in tokens.
func (c *slotCache) acquire(blocks []uint64, blockSize, tokens int) (slot, cached int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if blockSize != c.blockSize {
		return -1, 0
	}
	slot, best := -1, -1
	for i := range c.n {
		s := &c.slots[i]
		if s.inUse {
			continue
		}
		if n := commonPrefix(s.blocks, blocks); n > best {
			slot, best = i, n
		}
	}
	if slot < 0 {
		return -1, 0
	}
	s := &c.slots[slot]
	s.inUse = true
	s.blocks = s.blocks[:best]
	cached = min(best, max(tokens-1, 0)/blockSize) * blockSize
	c.queries += int64(tokens)
	c.hits += int64(cached)
	return slot, cached
}

// store makes blocks, a prompt just prefilled, the content of slot. The
// hashes are copied: the caller's slice is pooled.
func (c *slotCache) store(slot int, blocks []uint64, blockSize int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot < 0 || slot >= len(c.slots) || blockSize != c.blockSize {
		return
	}
	c.slots[slot].blocks = append(c.slots[slot].blocks[:0], blocks...)
}

// release frees slot for the next request; its prompt stays.
func (c *slotCache) release(slot int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot >= 0 && slot < len(c.slots) {
		c.slots[slot].inUse = false
	}
}

// stats reports the counters and the blocks the slots in use hold.
func (c *slotCache) stats() cacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := cacheStats{queries: c.queries, hits: c.hits}
	for _, s := range c.slots[:c.n] {
		st.blocks += len(s.blocks)
	}
	return st
}

// commonPrefix is the number of leading hashes a and b share. Hashes are
// chained, so the first difference ends the match for good.
func commonPrefix(a, b []uint64) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
