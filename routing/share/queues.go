package share

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/routing/prefix"
)

// Besides its decisions, each instance tells the others how much prefill
// it has queued on each replica (pool.Replica.OwnPrefill: the uncached
// prompt of the requests it sent there that have no first token yet), and
// each adds the others' figures to its own (pool.Replica.SetPeerPrefill).
// prefix_cache weighs that queue against a cold start elsewhere; an
// instance that saw only its own share of it would send cold prompts, and
// a popular prefix's requests, onto a lane the other instances already
// fill. A figure is a snapshot, not a delta: one lost costs nothing once
// the next arrives, and an instance that stops telling (gone, or Redis
// away) stops counting after peerTTL.

const (
	// minKickGap spaces the writes that queue changes ask for: at most
	// 200 a second per instance, whatever the traffic.
	minKickGap = 5 * time.Millisecond
	// refreshEvery is how often a figure that is not zero is told again
	// when it has not changed, so that the others keep counting it.
	refreshEvery = 250 * time.Millisecond
	// peerTTL is how long another instance's figure counts without news.
	peerTTL = time.Second
)

// queueVersion starts a batch of queue figures (the entry's "q" field):
// records of uvarint len(model), model, uvarint blockSize, uvarint
// len(replica), replica, uvarint blocks. A field of its own, so that an
// instance of an earlier version, which reads only "b", ignores it.
const queueVersion = 1

// QueueFigure is one instance's pending prefill on one replica, in blocks
// of BlockSize bytes.
type QueueFigure struct {
	Model     string
	BlockSize int
	Replica   string
	Blocks    int64
}

func appendQueue(b []byte, model string, blockSize int, replica string, blocks int64) []byte {
	if len(b) == 0 {
		b = append(b, queueVersion)
	}
	b = binary.AppendUvarint(b, uint64(len(model)))
	b = append(b, model...)
	b = binary.AppendUvarint(b, uint64(blockSize))
	b = binary.AppendUvarint(b, uint64(len(replica)))
	b = append(b, replica...)
	return binary.AppendUvarint(b, uint64(max(blocks, 0)))
}

// decodeQueues calls apply for each figure of b, stopping at the first
// malformed one.
func decodeQueues(b []byte, apply func(QueueFigure)) error {
	if len(b) == 0 || b[0] != queueVersion {
		return fmt.Errorf("%w: unknown queue version", errBatch)
	}
	r := fields{b: b[1:]}
	for len(r.b) > 0 {
		var f QueueFigure
		var ok bool
		var bs, blocks uint64
		if f.Model, ok = r.str(); !ok {
			return fmt.Errorf("%w: queue model", errBatch)
		}
		if bs, ok = r.num(prefix.MaxBlockSize); !ok {
			return fmt.Errorf("%w: queue block size", errBatch)
		}
		if f.Replica, ok = r.str(); !ok {
			return fmt.Errorf("%w: queue replica", errBatch)
		}
		// A queue longer than any prompt's blocks times a million requests
		// is garbage.
		if blocks, ok = r.num(1 << 40); !ok {
			return fmt.Errorf("%w: queue blocks", errBatch)
		}
		f.BlockSize, f.Blocks = int(bs), int64(blocks)
		apply(f)
	}
	return nil
}

// queues is one Model's side of the sharing of prefill queues.
type queues struct {
	mu sync.Mutex
	// replicas are the pool's replicas by URL (SetQueues); nil before the
	// policy first told.
	replicas map[string]*pool.Replica
	// told is the figure last told per replica, and when.
	told map[string]toldFigure
	// peers are the other instances' figures: replica, then instance.
	peers map[string]map[string]peerFigure
}

type toldFigure struct {
	blocks int64
	at     time.Time
}

type peerFigure struct {
	blocks int64
	at     time.Time
}

// SetQueues gives the model's replicas: their own pending prefill is told
// to the other instances, and the others' is recorded in them. It also
// does what SetReplicas does.
func (m *Model) SetQueues(rs []*pool.Replica) {
	urls := make([]string, 0, len(rs))
	byURL := make(map[string]*pool.Replica, len(rs))
	for _, r := range rs {
		urls = append(urls, r.URL)
		byURL[r.URL] = r
	}
	m.SetReplicas(urls)
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range q.replicas {
		if byURL[r.URL] != r {
			r.OnPendingChange(nil)
		}
	}
	q.replicas = byURL
	for _, r := range rs {
		r.OnPendingChange(m.hub.kickFlush)
	}
	for url := range q.peers {
		if _, ok := byURL[url]; !ok {
			delete(q.peers, url)
		}
	}
	for url, r := range byURL {
		r.SetPeerPrefill(q.sum(url))
	}
}

// appendTold appends to b the figures of m's replicas to tell now: those
// that changed since last told, and those not zero not told for
// refreshEvery.
func (m *Model) appendTold(b []byte, now time.Time) []byte {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	for url, r := range q.replicas {
		n := r.OwnPrefill()
		last, ok := q.told[url]
		if ok && n == last.blocks && (n == 0 || now.Sub(last.at) < refreshEvery) {
			continue
		}
		if !ok && n == 0 {
			continue // nothing queued, nothing ever told
		}
		if q.told == nil {
			q.told = map[string]toldFigure{}
		}
		q.told[url] = toldFigure{blocks: n, at: now}
		b = appendQueue(b, m.name, m.blockSize, url, n)
	}
	return b
}

// forget drops what was told, so that everything is told again (after
// Redis was away: the others have forgotten it).
func (m *Model) forgetTold() {
	m.queues.mu.Lock()
	m.queues.told = nil
	m.queues.mu.Unlock()
}

// stopQueues forgets the other instances' figures, in the replicas too:
// nothing will refresh them (Detach).
func (m *Model) stopQueues() {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	for url := range q.peers {
		if r, ok := q.replicas[url]; ok {
			r.SetPeerPrefill(0)
		}
	}
	for _, r := range q.replicas {
		r.OnPendingChange(nil)
	}
	q.peers = nil
}

// kickFlush asks the flusher to tell the queues now; it never blocks. A
// figure told at the next tick instead would be up to Interval late: a
// cold prompt's prefill lasts a few Intervals, and a queue seen drained
// late diverts the requests its replica holds into cold prefills
// elsewhere, seen filled late lets cold prompts pile onto it.
func (h *Hub) kickFlush() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// learnQueue records instance's figure f, as of at, if m serves its
// replica with the same block size.
func (m *Model) learnQueue(instance string, f QueueFigure, at time.Time) bool {
	if m.blockSize != f.BlockSize {
		return false
	}
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.replicas[f.Replica]
	if !ok {
		return false
	}
	if q.peers == nil {
		q.peers = map[string]map[string]peerFigure{}
	}
	byInst := q.peers[f.Replica]
	if byInst == nil {
		byInst = map[string]peerFigure{}
		q.peers[f.Replica] = byInst
	}
	byInst[instance] = peerFigure{blocks: f.Blocks, at: at}
	r.SetPeerPrefill(q.sum(f.Replica))
	return true
}

// expire stops counting the figures of instances that said nothing for
// peerTTL.
func (m *Model) expire(now time.Time) {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	for url, byInst := range q.peers {
		changed := false
		for inst, f := range byInst {
			if now.Sub(f.at) > peerTTL {
				delete(byInst, inst)
				changed = true
			}
		}
		if len(byInst) == 0 {
			delete(q.peers, url)
		}
		if r, ok := q.replicas[url]; ok && changed {
			r.SetPeerPrefill(q.sum(url))
		}
	}
}

// sum is the other instances' figures for url; q.mu held.
func (q *queues) sum(url string) int64 {
	var n int64
	for _, f := range q.peers[url] {
		n += f.blocks
	}
	return n
}

// queueBatch appends to b[:0] the figures the attached models tell now.
// Of a model attached twice (during a reload), the newest configuration's
// pool tells.
func (h *Hub) queueBatch(b []byte, now time.Time) []byte {
	h.mu.RLock()
	defer h.mu.RUnlock()
	b = b[:0]
	for _, list := range h.models {
		if len(list) > 0 {
			b = list[len(list)-1].appendTold(b, now)
		}
	}
	return b
}

// applyQueues records another instance's figures, as of at, in every
// pool of their model that serves their replica.
func (h *Hub) applyQueues(instance string, b []byte, at time.Time) error {
	if time.Since(at) > peerTTL {
		return nil // replayed: long out of date
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return decodeQueues(b, func(f QueueFigure) {
		for _, m := range h.models[f.Model] {
			m.learnQueue(instance, f, at)
		}
	})
}

// expireQueues stops counting silent instances' figures.
func (h *Hub) expireQueues(now time.Time) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, list := range h.models {
		for _, m := range list {
			m.expire(now)
		}
	}
}

// forgetTold makes every model tell all its figures again.
func (h *Hub) forgetTold() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, list := range h.models {
		for _, m := range list {
			m.forgetTold()
		}
	}
}
