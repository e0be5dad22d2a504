package simulator

import (
	"math"
	"sync"
	"time"

	"github.com/llmedge/llmedge/api"
)

// Floor is the least time to first token the simulated engine can give
// each prompt of a sequence, whatever the router: the prompt goes at once
// (nothing queued before it) to a replica that holds every block of every
// prompt sent before it, on any replica, and never evicts one. Only the
// tokens no earlier prompt had, from the first block that differs, are
// prefilled, then the first token takes the engine's fixed time. A real
// router cannot do better: a block it finds cached was prefilled for an
// earlier prompt, or for a later one whose prefill it then waited for. A
// workload's floor says how much of a policy's time to first token is
// the workload's own (a conversation joined with a history never sent,
// a tenant's first prompt) rather than the routing.
//
// The blocks and the lookup are the engine's own (promptBlocks and a
// prefixCache too large to evict): whole blocks only, the last prompt
// token always computed, the prompt alone cached (not the answer). Floor
// is safe for concurrent use.
type Floor struct {
	blockSize      int
	ttft, perToken time.Duration
	mu             sync.Mutex // over cache's lookup and insert, and blocks
	cache          *prefixCache
	blocks         []uint64
}

// NewFloor returns the floor of an engine cutting prompts into blocks of
// blockSize tokens, prefilling each uncached token in perToken and taking
// ttft more to the first token (Config's BlockSize, PrefillPerToken and
// TTFT), before any prompt was sent.
func NewFloor(blockSize int, ttft, perToken time.Duration) *Floor {
	blockSize = max(blockSize, 1)
	return &Floor{blockSize: blockSize, ttft: ttft, perToken: perToken, cache: newPrefixCache(blockSize, math.MaxInt32)}
}

// Send records the chat prompt of msgs as sent and returns its floor: the
// fixed time to the first token plus the prefill of its tokens beyond the
// longest run of leading blocks an earlier prompt had.
func (f *Floor) Send(msgs []api.Message) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var tokens int
	f.blocks, tokens = promptBlocks(f.blocks[:0], msgs, f.blockSize)
	cached := f.cache.lookup(f.blocks, f.blockSize, tokens)
	f.cache.insert(f.blocks, f.blockSize)
	return f.ttft + time.Duration(tokens-cached)*f.perToken
}
