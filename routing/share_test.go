package routing

import (
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/internal/redistest"
	"github.com/llmedge/llmedge/routing/prefix"
	"github.com/llmedge/llmedge/routing/share"
)

// instance is one gateway's pool of the same four replicas, its
// PrefixCache sharing its decisions through a Hub on srv.
func instance(t *testing.T, srv *redistest.Server, on bool) (*pool.Pool, *PrefixCache) {
	t.Helper()
	idx, err := prefix.New("m", prefix.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pc := &PrefixCache{Index: idx}
	if on {
		hub := share.New(share.Options{Redis: srv.Options(), Key: "test:routing", Interval: 5 * time.Millisecond})
		t.Cleanup(func() { _ = hub.Destruct() })
		pc.Share = hub.Attach("m", idx)
		hub.Start()
	}
	p := pool.New("m", pc)
	p.Set(replicas(t, "http://r0:1", "http://r1:1", "http://r2:1", "http://r3:1"))
	return p, pc
}

// Conversations whose turns alternate between two instances stay on one
// replica when the instances share their decisions, and scatter when
// they do not.
func TestPrefixCacheSharedBetweenInstances(t *testing.T) {
	srv := redistest.Start(t)
	for _, on := range []bool{true, false} {
		a, pa := instance(t, srv, on)
		b, pb := instance(t, srv, on)
		moved := 0
		for conv := range 8 {
			var home string
			for turn := 1; turn <= 4; turn++ {
				p, other, otherPool := a, pb, b
				if (conv+turn)%2 == 0 {
					p, other, otherPool = b, pa, a
				}
				l := route(t, p, conversation(conv, conv, turn))
				url := l.Replica.URL
				l.Release(pool.Success)
				if turn == 1 {
					home = url
				} else if url != home {
					moved++
				}
				if on { // the next turn comes seconds later in life
					want := conversation(conv, conv, turn)
					hashes := other.Index.Hash(nil, want)
					deadline := time.Now().Add(5 * time.Second)
					for other.Index.Match(nil, hashes, []string{url})[0] < len(hashes) {
						if time.Now().After(deadline) {
							t.Fatalf("the other instance did not learn conversation %d turn %d", conv, turn)
						}
						time.Sleep(5 * time.Millisecond)
					}
					// Nor is this turn's prefill still queued there, as
					// the other instance last heard: seconds later it
					// is not.
					for !queuesEmpty(otherPool) {
						if time.Now().After(deadline) {
							t.Fatalf("the other instance still counts conversation %d turn %d's prefill", conv, turn)
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
			}
		}
		switch {
		case on && moved > 0:
			t.Errorf("sharing: %d turns left their conversation's replica", moved)
		case !on && moved == 0:
			t.Error("without sharing, no turn left its conversation's replica: the test cannot tell")
		}
		t.Logf("sharing %v: %d of 24 later turns moved", on, moved)
	}
}

func queuesEmpty(p *pool.Pool) bool {
	for _, r := range p.Replicas() {
		if r.PendingPrefill() != 0 {
			return false
		}
	}
	return true
}

// An instance weighs the prefill the other instances queued on a replica
// as a single instance weighs its own: a conversation's next turn, cached
// on a replica whose lane another instance has just filled with a long
// cold prompt, starts sooner elsewhere, and goes there.
func TestPrefixCacheCountsOtherInstancesQueues(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := instance(t, srv, true)
	b, pb := instance(t, srv, true)

	turn1 := route(t, a, conversation(1, 1, 1))
	home := turn1.Replica.URL
	turn1.FirstToken()
	turn1.Release(pool.Success)
	others := func(p *pool.Pool) (out []*pool.Replica) {
		for _, r := range p.Replicas() {
			if r.URL != home {
				out = append(out, r)
			}
		}
		return out
	}
	// a sends a long cold prompt to the same replica; it is prefilling.
	cold, err := a.Acquire(&pool.Request{Model: "m", Messages: conversation(2, 1, 8)}, others(a))
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Release(pool.Success)
	queued := cold.Replica.OwnPrefill()
	if cold.Replica.URL != home || queued == 0 {
		t.Fatalf("the cold prompt went to %s with %d blocks, want %s and a queue", cold.Replica.URL, queued, home)
	}
	var bHome *pool.Replica
	for _, r := range b.Replicas() {
		if r.URL == home {
			bHome = r
		}
	}
	next := conversation(1, 1, 2)
	hashes := pb.Index.Hash(nil, next)
	deadline := time.Now().Add(5 * time.Second)
	for pb.Index.Match(nil, hashes, []string{home})[0] == 0 || bHome.PendingPrefill() != queued {
		if time.Now().After(deadline) {
			t.Fatalf("b does not count a's queue: %d blocks pending on %s, a queued %d", bHome.PendingPrefill(), home, queued)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l := route(t, b, next)
	defer l.Release(pool.Success)
	if l.Replica.URL == home {
		t.Errorf("b sent the turn behind %d blocks of a's prefill on %s, where a cold start elsewhere costs %d",
			queued, home, len(hashes))
	}
}
