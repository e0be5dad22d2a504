package routing

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/internal/redistest"
	"github.com/llmedge/llmedge/routing/prefix"
	"github.com/llmedge/llmedge/routing/share"
)

func newPrefixPool(t testing.TB, n int) (*pool.Pool, []*pool.Replica, *PrefixCache) {
	t.Helper()
	idx, err := prefix.New("m", prefix.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pc := &PrefixCache{Index: idx}
	p := pool.New("m", pc)
	var urls []string
	for i := range n {
		urls = append(urls, fmt.Sprintf("http://r%d:1", i))
	}
	rs := replicas(t, urls...)
	p.Set(rs)
	return p, rs, pc
}

// conversation is a tenant's multi-turn chat: a long system prompt, then
// turns that resend the whole history.
func conversation(tenant, conv, turns int) []api.Message {
	msgs := []api.Message{{Role: "system", Content: fmt.Sprintf("tenant %d: ", tenant) + strings.Repeat("You are a careful assistant. ", 60)}}
	for t := range turns {
		msgs = append(msgs,
			api.Message{Role: "user", Content: fmt.Sprintf("conversation %d, question %d: %s", conv, t, strings.Repeat("why? ", 30))},
			api.Message{Role: "assistant", Content: strings.Repeat("because. ", 30)})
	}
	return msgs[:len(msgs)-1] // ends with the user's turn
}

func route(t testing.TB, p *pool.Pool, msgs []api.Message) pool.Lease {
	t.Helper()
	l, err := p.Acquire(&pool.Request{Model: "m", Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Each turn of a conversation lands where the previous turns went, with a
// prediction that grows with the history; conversations that share only
// their tenant's system prompt do not follow each other once load spreads
// them.
func TestPrefixCacheKeepsConversationsWhereTheirHistoryIs(t *testing.T) {
	p, _, _ := newPrefixPool(t, 4)
	// Hold each first turn's slot so that the four conversations spread
	// over the four replicas (the bound sends the later ones elsewhere).
	home := map[int]*pool.Replica{}
	var held []pool.Lease
	for conv := range 4 {
		l := route(t, p, conversation(1, conv, 1))
		home[conv] = l.Replica
		held = append(held, l)
	}
	seen := map[*pool.Replica]bool{}
	for _, r := range home {
		seen[r] = true
	}
	if len(seen) < 3 {
		t.Fatalf("four conversations under load went to %d replicas", len(seen))
	}
	for _, l := range held {
		l.Release(pool.Success)
	}
	for turn := 2; turn <= 5; turn++ {
		for conv := range 4 {
			l := route(t, p, conversation(1, conv, turn))
			if l.Replica != home[conv] {
				t.Fatalf("conversation %d turn %d went to %s, its history is on %s", conv, turn, l.Replica.URL, home[conv].URL)
			}
			if l.Choice.Reason != pool.ReasonPrefix || l.Choice.Cached < 0.5 {
				t.Fatalf("turn %d: choice %+v, want a prefix hit over half the prompt", turn, l.Choice)
			}
			l.Release(pool.Success)
		}
	}
}

// The replica holding the prefix is skipped once it is loaded beyond the
// bound, for the least loaded one.
func TestPrefixCacheBoundsLoad(t *testing.T) {
	p, rs, _ := newPrefixPool(t, 3)
	msgs := conversation(1, 1, 2)
	first := route(t, p, msgs)
	warm := first.Replica
	first.Release(pool.Success)
	var held []pool.Lease
	for range 6 { // the warm replica's own requests
		l, err := p.Acquire(&pool.Request{Model: "m"}, otherThan(rs, warm))
		if err != nil || l.Replica != warm {
			t.Fatalf("setup: %v %v", l.Replica, err)
		}
		held = append(held, l)
	}
	l := route(t, p, msgs)
	if l.Replica == warm || l.Choice.Reason != pool.ReasonLoad {
		t.Fatalf("an overloaded warm replica was chosen: %s %+v", l.Replica.URL, l.Choice)
	}
	l.Release(pool.Success)
	for _, h := range held {
		h.Release(pool.Success)
	}
	if l := route(t, p, msgs); l.Replica != warm && l.Choice.Reason == pool.ReasonPrefix && l.Choice.Cached < 0.9 {
		t.Fatalf("after the load went, the prompt should find its prefix again: %s %+v", l.Replica.URL, l.Choice)
	}
}

// A popular prefix (one tenant's system prompt, many conversations at
// once) spreads over every replica instead of piling onto one.
func TestPrefixCachePopularPrefixSpreads(t *testing.T) {
	p, rs, _ := newPrefixPool(t, 4)
	var held []pool.Lease
	for conv := range 40 {
		held = append(held, route(t, p, conversation(7, conv, 1)))
	}
	for _, r := range rs {
		if o := r.Outstanding(); o < 6 || o > 14 {
			t.Fatalf("replica %s holds %d of 40 requests sharing a prefix", r.URL, o)
		}
	}
	for _, l := range held {
		l.Release(pool.Success)
	}
}

// An engine that reports its KV cache full is avoided while others are not.
func TestPrefixCacheAvoidsFullKVCache(t *testing.T) {
	p, rs, _ := newPrefixPool(t, 2)
	msgs := conversation(1, 1, 2)
	first := route(t, p, msgs)
	warm := first.Replica
	first.Release(pool.Success)
	warm.SetEngineLoad(pool.EngineLoad{KVUsage: 0.99, Until: farFuture})
	l := route(t, p, msgs)
	if l.Replica == warm {
		t.Fatal("chose the replica whose KV cache is full")
	}
	l.Release(pool.Success)
	for _, r := range rs {
		r.SetEngineLoad(pool.EngineLoad{KVUsage: 0.99, Until: farFuture})
	}
	if l := route(t, p, msgs); l.Choice.Reason != pool.ReasonPrefix || l.Choice.Cached < 0.9 {
		t.Fatalf("with every cache full, the prefix should decide again: %+v", l.Choice)
	}
}

// Replicas that leave the pool leave the index.
func TestPrefixCacheForgetsReplicasThatLeave(t *testing.T) {
	p, rs, pc := newPrefixPool(t, 3)
	for conv := range 6 {
		l := route(t, p, conversation(1, conv, 1))
		l.Release(pool.Success)
	}
	p.Set(rs[:2])
	for _, r := range pc.Index.Stats().Replicas {
		if r.Replica == rs[2].URL {
			t.Fatal("the index still tracks a replica that left")
		}
	}
}

func otherThan(rs []*pool.Replica, keep *pool.Replica) []*pool.Replica {
	var out []*pool.Replica
	for _, r := range rs {
		if r != keep {
			out = append(out, r)
		}
	}
	return out
}

func BenchmarkPrefixCacheSelect16KiB(b *testing.B) {
	p, _, _ := newPrefixPool(b, 4)
	msgs := conversation(1, 1, 14) // about 16 KiB
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	b.ReportMetric(float64(n), "prompt-bytes")
	req := &pool.Request{Model: "m", Messages: msgs}
	b.ReportAllocs()
	for b.Loop() {
		l, err := p.Acquire(req, nil)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(pool.Success)
	}
}

// A cold prompt goes where the least prefill is queued, not where the
// fewest requests are: requests past their first token (decoding) queue
// no prefill.
func TestPrefixCacheColdPromptAvoidsPrefillQueue(t *testing.T) {
	p, rs, _ := newPrefixPool(t, 2)
	// r0: three requests decoding (their first tokens arrived).
	for range 3 {
		l, _ := p.Acquire(&pool.Request{Model: "m", Messages: conversation(1, 99, 1)}, []*pool.Replica{rs[1]})
		l.FirstToken()
	}
	// r1: one request still prefilling a long prompt.
	long := conversation(2, 1, 8)
	l1, _ := p.Acquire(&pool.Request{Model: "m", Messages: long}, []*pool.Replica{rs[0]})
	if rs[1].PendingPrefill() == 0 {
		t.Fatal("a request without its first token queues no prefill")
	}
	l := route(t, p, conversation(3, 1, 1)) // a tenant nobody has seen
	if l.Replica != rs[0] {
		t.Fatalf("the cold prompt went to the replica with %d blocks of prefill queued", rs[1].PendingPrefill())
	}
	l.Release(pool.Success)
	l1.Release(pool.Success)
	if rs[1].PendingPrefill() != 0 {
		t.Fatalf("pending prefill %d after its request ended", rs[1].PendingPrefill())
	}
}

// Among equally good replicas the draw is even.
func TestPrefixCacheTiesAreEven(t *testing.T) {
	p, rs, _ := newPrefixPool(t, 4)
	count := map[*pool.Replica]int{}
	for i := range 4000 {
		// Short prompts hash to no block: every replica is as good.
		l := route(t, p, []api.Message{{Role: "user", Content: fmt.Sprint(i)}})
		count[l.Replica]++
		l.Release(pool.Success)
	}
	for _, r := range rs {
		if n := count[r]; n < 800 || n > 1200 {
			t.Fatalf("uneven draw among equals: %v", count)
		}
	}
}

// The same decision with sharing on: a started Hub on a real Redis, whose
// flusher writes the decisions while the benchmark makes them.
func BenchmarkPrefixCacheSelect16KiBShared(b *testing.B) {
	srv := redistest.Start(b)
	hub := share.New(share.Options{Redis: srv.Options(), Key: "bench:routing"})
	defer hub.Destruct()
	p, _, pc := newPrefixPool(b, 4)
	pc.Share = hub.Attach("m", pc.Index)
	pc.ReplicasChanged(p.Replicas()) // as the pool does: their queues are told too
	hub.Start()
	msgs := conversation(1, 1, 14)
	req := &pool.Request{Model: "m", Messages: msgs}
	b.ReportAllocs()
	for b.Loop() {
		l, err := p.Acquire(req, nil)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(pool.Success)
	}
	st := hub.Stats()
	b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
}

// On engines that order by class, an online request is routed by the
// online work on each replica: the batch lines there, which the engine
// preempts for it, neither load the replica nor queue prefill ahead of
// it. Without the engines' order they count, as for a batch line.
func TestPrefixCacheOnlineOvertakesBatchLines(t *testing.T) {
	for _, tt := range []struct {
		name    string
		req     pool.Request
		wantOn1 bool // to r1, the replica with more requests but fewer online
	}{
		{name: "online, engines by class", req: pool.Request{Priority: api.PriorityStandard, EngineByClass: true}, wantOn1: true},
		{name: "online, engines first come first served", req: pool.Request{Priority: api.PriorityStandard}},
		{name: "a batch line, engines by class", req: pool.Request{Priority: api.PrioritySheddable, EngineByClass: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, rs, _ := newPrefixPool(t, 2)
			hold := func(r *pool.Replica, prio api.Priority, n int) {
				for i := range n {
					l, err := p.Acquire(&pool.Request{Model: "m", Priority: prio, Messages: conversation(10+i, int(prio)+5, 1)},
						[]*pool.Replica{rs[1-slices.Index(rs, r)]})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { l.Release(pool.Success) })
				}
			}
			hold(rs[0], api.PriorityStandard, 3)  // r0: three online requests
			hold(rs[1], api.PriorityStandard, 1)  // r1: one online request
			hold(rs[1], api.PrioritySheddable, 6) // and six batch lines, prefilling
			req := tt.req
			req.Model, req.Messages = "m", conversation(99, 1, 1)
			l, err := p.Acquire(&req, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(pool.Success)
			if on1 := l.Replica == rs[1]; on1 != tt.wantOn1 {
				t.Fatalf("went to r1: %v, want %v (loads for it %.0f, %.0f; prefill queued %d, %d)", on1, tt.wantOn1,
					rs[0].LoadFor(&req), rs[1].LoadFor(&req), rs[0].PendingPrefillFor(&req), rs[1].PendingPrefillFor(&req))
			}
		})
	}
}
