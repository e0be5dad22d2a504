package simulator

import "sync"

// prefixCache is a replica's prefix cache: the set of KV blocks it still
// holds, keyed by chained block hash (prompt.go), bounded at capacity blocks
// with least-recently-used eviction. It keeps no KV data, only which blocks
// a prefill could skip.
//
// The LRU list lives in a slice of nodes linked by index, and the index map
// points into it, so that a warm cache inserts and evicts without
// allocating: an evicted node is reused for the new block.
type prefixCache struct {
	mu        sync.Mutex
	blockSize int // tokens per block the stored hashes were cut with
	capacity  int
	index     map[uint64]int32 // block hash → node
	// nodes[0] is the sentinel of the circular LRU list: nodes[0].next is
	// the most recently used block, nodes[0].prev the least.
	nodes []lruNode
	// free lists nodes left unused when the capacity shrank.
	free []int32
	// queries and hits count prompt tokens looked up and found, as vLLM's
	// prefix_cache_queries and prefix_cache_hits do.
	queries, hits int64
}

type lruNode struct {
	hash       uint64
	prev, next int32
}

// newPrefixCache returns an empty cache of capacity blocks of blockSize
// tokens.
func newPrefixCache(blockSize, capacity int) *prefixCache {
	c := &prefixCache{blockSize: blockSize, capacity: capacity, index: make(map[uint64]int32)}
	c.nodes = []lruNode{{}}
	return c
}

// configure applies a new block size and capacity. Hashes cut with another
// block size mean nothing any more, so a new block size empties the cache;
// a smaller capacity evicts the least recently used blocks beyond it.
func (c *prefixCache) configure(blockSize, capacity int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if blockSize != c.blockSize {
		c.blockSize = blockSize
		c.clearLocked()
	}
	c.capacity = capacity
	for len(c.index) > c.capacity {
		c.free = append(c.free, c.evictLocked())
	}
}

// clear empties the cache; its counters stay.
func (c *prefixCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
}

// reset empties the cache and zeroes its counters.
func (c *prefixCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.queries, c.hits = 0, 0
}

func (c *prefixCache) clearLocked() {
	clear(c.index)
	c.nodes = c.nodes[:1]
	c.nodes[0] = lruNode{}
	c.free = c.free[:0]
}

// lookup returns how many of a prompt's tokens the cache holds: the leading
// run of its blocks found, times the block size. As in vLLM, the last prompt
// token is always computed (its logits start the reply), so at most
// tokens-1 count as cached. It counts the query and the hit in tokens, and
// does not touch the LRU order: insert does that after the prefill.
// Blocks cut with another block size (the Config changed meanwhile) are
// neither looked up nor counted.
func (c *prefixCache) lookup(blocks []uint64, blockSize, tokens int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if blockSize != c.blockSize {
		return 0
	}
	limit := min(len(blocks), max(tokens-1, 0)/blockSize)
	n := 0
	for n < limit {
		if _, ok := c.index[blocks[n]]; !ok {
			break
		}
		n++
	}
	cached := n * blockSize
	c.queries += int64(tokens)
	c.hits += int64(cached)
	return cached
}

// insert adds a prefilled prompt's blocks, or marks them used if present.
// It goes from the last block to the first, so that the first block ends
// most recently used and eviction takes a prompt's tail before its head,
// as vLLM frees a request's blocks in reverse order: a block is never kept
// longer than its parent, which it could not match without. A prompt of
// more blocks than the capacity keeps its first ones.
func (c *prefixCache) insert(blocks []uint64, blockSize int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if blockSize != c.blockSize || c.capacity <= 0 {
		return
	}
	blocks = blocks[:min(len(blocks), c.capacity)]
	// Take the blocks already cached off the list first, so that making
	// room for the new ones cannot evict them; with at most capacity
	// blocks, enough others are left to evict.
	for _, h := range blocks {
		if n, ok := c.index[h]; ok && c.linked(n) {
			c.unlinkLocked(n)
		}
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		h := blocks[i]
		n, ok := c.index[h]
		switch {
		case ok:
			if c.linked(n) { // the same hash twice in one prompt
				c.unlinkLocked(n)
			}
		case len(c.index) >= c.capacity:
			n = c.evictLocked()
		case len(c.free) > 0:
			n = c.free[len(c.free)-1]
			c.free = c.free[:len(c.free)-1]
		default:
			n = int32(len(c.nodes))
			c.nodes = append(c.nodes, lruNode{})
		}
		if !ok {
			c.nodes[n].hash = h
			c.index[h] = n
		}
		c.pushFrontLocked(n)
	}
}

// evictLocked removes the least recently used block and returns its node,
// now unlinked, for reuse.
func (c *prefixCache) evictLocked() int32 {
	n := c.nodes[0].prev
	c.unlinkLocked(n)
	delete(c.index, c.nodes[n].hash)
	return n
}

// unlinkLocked takes node n off the list; it stays unlinked (prev -1)
// until pushed again.
func (c *prefixCache) unlinkLocked(n int32) {
	p, nx := c.nodes[n].prev, c.nodes[n].next
	c.nodes[p].next = nx
	c.nodes[nx].prev = p
	c.nodes[n].prev, c.nodes[n].next = -1, -1
}

func (c *prefixCache) linked(n int32) bool { return c.nodes[n].prev >= 0 }

func (c *prefixCache) pushFrontLocked(n int32) {
	first := c.nodes[0].next
	c.nodes[n].prev, c.nodes[n].next = 0, first
	c.nodes[first].prev = n
	c.nodes[0].next = n
}

// cacheStats is a snapshot of the cache's counters and size.
type cacheStats struct {
	queries, hits int64
	blocks        int
}

func (c *prefixCache) stats() cacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cacheStats{queries: c.queries, hits: c.hits, blocks: len(c.index)}
}
