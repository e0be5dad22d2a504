package gateway

import (
	"math"

	"github.com/llmedge/llmedge/batch"
)

// NewBatchGate is the gate of batch lines on g's models: a line starts
// only on the capacity online requests leave idle, and batch lines hold
// at most share(model) (0..1; nil, or a value out of range, means 1) of
// the model's slots.
func NewBatchGate(g *Gateway, share func(model string) float64) batch.Gate {
	return &batchGate{g: g, share: share}
}

type batchGate struct {
	g     *Gateway
	share func(model string) float64
}

// Room implements batch.Gate. It is 0 while an online request of the
// model waits for a slot, or the pool is saturated for sheddable work
// (no free slot above its reserve, the engines queueing or their KV
// caches nearly full). Otherwise it is the free slots above the reserve,
// less the lines started that have not reached a replica yet (each free
// slot takes at most one new line per call: the load grows by what the
// engines show they can take), within the share. For replicas without a
// cap, whose slots are unknown, it is one line at a time, while their
// engines are not saturated.
func (b *batchGate) Room(model string, running int) int {
	m := b.g.Models[model]
	if m == nil || m.Pool == nil || len(m.Rollout) > 0 {
		return 0 // not served here; a rollout's lines have no pool of their own
	}
	p := m.Pool
	if p.Waiting() > 0 || p.Saturated() {
		return 0
	}
	// Lines the runner started that are not on a replica yet: their
	// slots are not taken, but are spoken for.
	starting := max(running-m.BatchRunning(), 0)
	s := p.Spare()
	room := s.Free - p.Reserve() - starting
	if s.Open {
		// A replica without a cap: one line at a time, and the engines'
		// figures (their queue, their KV cache) say when to stop.
		room = max(room, 1-starting)
	}
	share := b.shareOf(model)
	if share <= 0 {
		return 0 // batches are off for the model
	}
	if share < 1 && s.Slots > 0 {
		limit := int(math.Floor(share * float64(s.Slots)))
		room = min(room, limit-running)
	}
	return max(room, 0)
}

func (b *batchGate) shareOf(model string) float64 {
	if b.share == nil {
		return 1
	}
	s := b.share(model)
	if !(s >= 0 && s <= 1) {
		return 1 // NaN, or beyond the whole
	}
	return s
}
