package share

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The stream, <prefix>routing, holds entries of two fields: i, the
// instance that wrote it, and b, a batch (codec.go). A stream rather than
// a pub/sub channel because it is also the snapshot: an instance that
// joins, or whose connection was down a while, reads from where it needs
// to (the last Window, or the last entry it read) with the same call that
// follows new entries; a channel would lose what was said while it was
// not listening, and need a second structure to learn the current view.

// flushLoop writes the buffered insertions every Interval.
func (h *Hub) flushLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.opts.Interval)
	defer t.Stop()
	var entries [][]byte
	var queues []byte
	var retryAt, lastWrite time.Time
	for {
		select {
		case <-h.ctx.Done():
			h.drop(len(h.buf))
			return
		case <-t.C:
		case <-h.kick:
			if d := minKickGap - time.Since(lastWrite); d > 0 {
				time.Sleep(d)
			}
		}
		now := time.Now()
		h.expireQueues(now)
		n := len(h.buf)
		if !h.up.Load() && now.Before(retryAt) {
			if n > 0 {
				h.drop(n) // Redis is away: no call per tick, and the buffer frees
			}
			continue
		}
		queues = h.queueBatch(queues, now)
		if n == 0 && len(queues) == 0 {
			continue
		}
		entries = entries[:0]
		if n > 0 {
			entries = h.encode(entries, n)
		}
		lastWrite = now
		if err := h.write(entries, queues); err != nil {
			h.state(err)
			h.dropped.Add(uint64(n))
			retryAt = time.Now().Add(retryEvery)
			continue
		}
		h.state(nil)
		h.published.Add(uint64(n))
	}
}

// drop takes n insertions off the buffer unsent.
func (h *Hub) drop(n int) {
	for range n {
		r := <-h.buf
		h.put(r.hashes)
	}
	h.dropped.Add(uint64(n))
}

// encode takes n insertions off the buffer into entries of at most
// MaxEntryBytes (unless one insertion is larger), reusing entries' arrays.
func (h *Hub) encode(entries [][]byte, n int) [][]byte {
	// entries' arrays beyond its length are last flush's: reused.
	entries = entries[:0]
	k := 0
	next := func() {
		if k < cap(entries) {
			entries = entries[:k+1]
		} else {
			entries = append(entries, nil)
		}
		entries[k] = startBatch(entries[k])
		k++
	}
	next()
	for range n {
		r := <-h.buf
		if len(entries[k-1]) > 1 && len(entries[k-1])+len(r.m.name)+len(r.replica)+8*len(*r.hashes)+16 > MaxEntryBytes {
			next()
		}
		entries[k-1] = appendRecord(entries[k-1], r.m.name, r.m.blockSize, r.replica, *r.hashes)
		h.put(r.hashes)
	}
	return entries[:k]
}

// write appends entries to the stream, the queue figures with the first
// (or alone), trimming it and renewing its expiry, in one round trip.
func (h *Hub) write(entries [][]byte, queues []byte) error {
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	pipe := h.client.Pipeline()
	add := func(values ...any) {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: h.opts.Key, MaxLen: h.opts.MaxLen, Approx: true, Values: values})
	}
	for i, e := range entries {
		if i == 0 && len(queues) > 0 {
			add("i", h.instance, "b", e, "q", queues)
		} else {
			add("i", h.instance, "b", e)
		}
	}
	if len(entries) == 0 {
		add("i", h.instance, "q", queues)
	}
	pipe.PExpire(ctx, h.opts.Key, h.opts.Window)
	_, err := pipe.Exec(ctx)
	return err
}

// readLoop applies the other instances' entries, from the last Window on
// at first, then from the last one read.
func (h *Hub) readLoop() {
	defer h.wg.Done()
	last := ""
	var buf []uint64
	// skew is Redis's clock ahead of this one, by which entries' times
	// (their IDs) are read; learned after every error.
	var skew time.Duration
	known := false
	for h.ctx.Err() == nil {
		if last == "" {
			last = strconv.FormatInt(time.Now().Add(-h.opts.Window).UnixMilli(), 10)
		}
		if !known {
			skew, known = h.redisSkew()
		}
		res, err := h.client.XRead(h.ctx, &redis.XReadArgs{Streams: []string{h.opts.Key, last}, Count: 256, Block: block}).Result()
		if h.ctx.Err() != nil {
			return
		}
		if errors.Is(err, redis.Nil) {
			h.state(nil) // nothing new within block
			continue
		}
		if err != nil {
			h.state(err)
			known = false
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(retryEvery):
			}
			continue
		}
		h.state(nil)
		for _, s := range res {
			for _, m := range s.Messages {
				last = m.ID
				inst, _ := m.Values["i"].(string)
				if inst == h.instance {
					continue
				}
				if b, ok := m.Values["b"].(string); ok {
					if buf, err = decodeBatch([]byte(b), buf, h.apply); err != nil {
						h.failures.Add(1)
					}
				}
				if q, ok := m.Values["q"].(string); ok {
					// A figure is as old as its entry: those replayed from
					// minutes ago are not counted.
					at := time.Now()
					if t := entryTime(m.ID).Add(-skew); known && !t.IsZero() && t.Before(at) {
						at = t
					}
					if err := h.applyQueues(inst, []byte(q), at); err != nil {
						h.failures.Add(1)
					}
				}
			}
		}
	}
}

// entryTime is when a stream entry was added, from its ID
// ("<milliseconds>-<sequence>"); zero when unreadable.
func entryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// redisSkew is how far Redis's clock is ahead of this one (half a round
// trip's precision); false when Redis did not say.
func (h *Hub) redisSkew() (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	before := time.Now()
	t, err := h.client.Time(ctx).Result()
	if err != nil {
		return 0, false
	}
	after := time.Now()
	return t.Sub(before.Add(after.Sub(before) / 2)), true
}
