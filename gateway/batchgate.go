package gateway

import (
	"math"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
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
// (no free slot above its reserve, the engines queueing — on engines
// that order by class, queueing more than the gateway's own sheddable
// work — or their KV caches nearly full). Otherwise it is the free slots above the reserve,
// less the lines started that have not reached a replica yet (each free
// slot takes at most one new line per call: the load grows by what the
// engines show they can take), within the share. For replicas without a
// cap, whose slots are unknown, it is one line at a time, while their
// engines are not saturated. A weighted rollout's lines go to any of its
// shares: it has the room of the one with the least.
func (b *batchGate) Room(model string, running int) int {
	m := b.g.Models[model]
	if m == nil {
		return 0
	}
	share := b.shareOf(model)
	if share <= 0 {
		return 0 // batches are off for the model
	}
	// Lines the runner started that are not on a replica yet: their
	// slots are not taken, but are spoken for.
	starting := max(running-m.BatchRunning(), 0)
	if len(m.Rollout) == 0 {
		return poolRoom(m.Pool, byClass(m), running, starting, share)
	}
	room := -1
	for _, s := range m.Rollout {
		t := b.g.Models[s.Model]
		if t == nil {
			return 0
		}
		if r := poolRoom(t.Pool, byClass(t), running, starting, share); room < 0 || r < room {
			room = r
		}
	}
	return max(room, 0)
}

// byClass reports whether m's engines order their queues by class of
// work with sheddable work last (engine_priority, lower runs first):
// online requests overtake the batch lines queued there.
func byClass(m *Model) bool {
	p := m.EnginePriority
	if len(p) != len(api.Priorities) {
		return false
	}
	last := p[api.PrioritySheddable.Index()]
	return last > p[api.PriorityCritical.Index()] && last > p[api.PriorityStandard.Index()]
}

// poolRoom is the room of p for batch lines, running of them started,
// starting of which hold no slot yet, within share of its slots. On
// engines that order by class (byClass) a queue of the gateway's own
// sheddable work does not close the room (pool.SpareBelow): the lines
// wait there for the sequences online work leaves, which the engine
// hands them at once, while an online request overtakes them.
func poolRoom(p *pool.Pool, byClass bool, running, starting int, share float64) int {
	if p == nil || p.Waiting() > 0 {
		return 0
	}
	var s pool.Spare
	if byClass {
		s = p.SpareBelow()
	} else {
		s = p.Spare()
	}
	if !s.Usable || (!s.Open && s.Free <= p.Reserve()) {
		return 0 // saturated for sheddable work
	}
	room := s.Free - p.Reserve() - starting
	if s.Open {
		// A replica without a cap: one line at a time, and the engines'
		// figures (their queue, their KV cache) say when to stop.
		room = max(room, 1-starting)
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
