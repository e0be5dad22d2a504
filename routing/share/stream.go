package share

import (
	"context"
	"errors"
	"strconv"
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
	var retryAt time.Time
	for {
		select {
		case <-h.ctx.Done():
			h.drop(len(h.buf))
			return
		case <-t.C:
		}
		n := len(h.buf)
		if n == 0 {
			continue
		}
		if !h.up.Load() && time.Now().Before(retryAt) {
			h.drop(n) // Redis is away: no call per tick, and the buffer frees
			continue
		}
		entries = h.encode(entries, n)
		if err := h.write(entries); err != nil {
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

// write appends entries to the stream, trimming it and renewing its
// expiry, in one round trip.
func (h *Hub) write(entries [][]byte) error {
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	pipe := h.client.Pipeline()
	for _, e := range entries {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: h.opts.Key, MaxLen: h.opts.MaxLen, Approx: true,
			Values: []any{"i", h.instance, "b", e}})
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
	for h.ctx.Err() == nil {
		if last == "" {
			last = strconv.FormatInt(time.Now().Add(-h.opts.Window).UnixMilli(), 10)
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
				if m.Values["i"] == h.instance {
					continue
				}
				b, _ := m.Values["b"].(string)
				if buf, err = decodeBatch([]byte(b), buf, h.apply); err != nil {
					h.failures.Add(1)
				}
			}
		}
	}
}
