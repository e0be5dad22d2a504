package simulator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
)

// engineCfg is cfg with defaults, as a Server would use it.
func engineCfg(cfg Config) Config { return cfg.clamped().withDefaults() }

// userMsgs is a one-message prompt of n words at word offset off.
func userMsgs(off, n int) []api.Message {
	return []api.Message{{Role: "user", Content: wordsText(off, n)}}
}

// pass runs one request's passage to its first token and returns how long
// it took and the prefill time the engine charged.
func pass(t *testing.T, e *engine, cfg Config, msgs []api.Message) (time.Duration, time.Duration) {
	t.Helper()
	q := e.sequence(cfg, plan{Prompt: msgs, PromptTokens: promptTokens(msgs), Tokens: []string{"x"}})
	defer q.end()
	start := time.Now()
	if !q.firstToken(t.Context()) {
		t.Fatal("firstToken failed")
	}
	return time.Since(start), q.prefill
}

func TestEngineTTFTFollowsUncachedTokens(t *testing.T) {
	const per = 20 * time.Microsecond
	cfg := engineCfg(Config{PrefillPerToken: Duration(per), TTFT: Duration(time.Millisecond)})
	e := newEngine(cfg)

	// Cold prompts: TTFT grows with their length. (Judged by the prefill
	// charged and by the first token never coming before it: a sleep may
	// overshoot on a busy machine, so wall times are not compared.)
	var last time.Duration
	for _, words := range []int{100, 500, 2500} {
		msgs := userMsgs(words, words)
		n := promptTokens(msgs)
		took, prefill := pass(t, e, cfg, msgs)
		if prefill != time.Duration(n)*per {
			t.Errorf("%d cold tokens: prefill %s, want %s", n, prefill, time.Duration(n)*per)
		}
		if took < prefill+time.Millisecond {
			t.Errorf("%d cold tokens: first token after %s, less than prefill %s + TTFT", n, took, prefill)
		}
		if prefill <= last {
			t.Errorf("%d cold tokens: prefill %s, not longer than a shorter prompt's %s", n, prefill, last)
		}
		last = prefill
	}

	// The longest prompt again: only its last partial block is prefilled.
	msgs := userMsgs(2500, 2500)
	n := promptTokens(msgs) // 2504: 156 full blocks and 8 tokens
	took, prefill := pass(t, e, cfg, msgs)
	if want := time.Duration(n-156*16) * per; prefill != want {
		t.Errorf("warm: prefill %s, want %s", prefill, want)
	}
	if prefill >= last || took < prefill+time.Millisecond {
		t.Errorf("warm: prefill %s (first token after %s), not shorter than cold %s", prefill, took, last)
	}

	// A longer conversation that starts with it hits all of its blocks.
	turn2 := append(slices.Clone(msgs), api.Message{Role: "assistant", Content: "sure"}, api.Message{Role: "user", Content: wordsText(9, 200)})
	_, prefill = pass(t, e, cfg, turn2)
	if want := time.Duration(promptTokens(turn2)-156*16) * per; prefill != want {
		t.Errorf("turn 2: prefill %s, want %s", prefill, want)
	}

	// Without the prefix cache every token is prefilled.
	off := cfg
	off.NoPrefixCache = true
	if _, prefill = pass(t, e, off, msgs); prefill != time.Duration(n)*per {
		t.Errorf("no prefix cache: prefill %s, want %s", prefill, time.Duration(n)*per)
	}
}

// TestEnginePrefillLane runs prefills side by side: they take turns, so the
// later ones wait for the earlier; identical prompts hit what the prefill
// before them cached.
func TestEnginePrefillLane(t *testing.T) {
	const per = 100 * time.Microsecond
	cfg := engineCfg(Config{PrefillPerToken: Duration(per)})
	e := newEngine(cfg)
	prompts := [][]api.Message{userMsgs(1, 300), userMsgs(2, 300), userMsgs(1, 300)}
	done := make([]time.Duration, len(prompts)) // first token, since t0
	prefill := make([]time.Duration, len(prompts))
	// Hold the lane while they queue, so that they queue in a known order.
	e.lane.acquire(t.Context())
	var t0 time.Time
	var wg sync.WaitGroup
	for i, msgs := range prompts {
		wg.Go(func() {
			_, prefill[i] = pass(t, e, cfg, msgs)
			done[i] = time.Since(t0)
		})
		waitFor(t, "the request to queue", func() bool { return e.waiting.Load() == int64(i+1) })
	}
	t0 = time.Now()
	e.lane.release()
	wg.Wait()

	cold := time.Duration(promptTokens(prompts[0])) * per // 30.4ms
	if prefill[0] != cold || prefill[1] != cold {
		t.Errorf("cold prefills %s and %s, want %s", prefill[0], prefill[1], cold)
	}
	if prefill[2] >= cold/10 {
		t.Errorf("the repeated prompt prefilled %s: it did not hit the first one's blocks", prefill[2])
	}
	// The second waited for the first's prefill before doing its own.
	if done[1] < 2*cold {
		t.Errorf("second request's first token after %s, want at least two prefills (%s)", done[1], 2*cold)
	}
	if e.running.Load() != 0 || e.waiting.Load() != 0 || e.kvHeld.Load() != 0 {
		t.Errorf("running %d waiting %d kv %d after all ended", e.running.Load(), e.waiting.Load(), e.kvHeld.Load())
	}
}

// TestEngineSeqCap admits sequences in arrival order up to MaxNumSeqs,
// counts the others as waiting, and releases a waiter's place when its
// client leaves.
func TestEngineSeqCap(t *testing.T) {
	cfg := engineCfg(Config{MaxNumSeqs: 2, BlockSize: 4, KVCacheBlocks: 20})
	e := newEngine(cfg)
	msgs := userMsgs(0, 2) // 6 tokens + 2 reply tokens: 2 blocks of 4
	newSeq := func() *sequence {
		return e.sequence(cfg, plan{Prompt: msgs, PromptTokens: promptTokens(msgs), Tokens: []string{"a", " b"}})
	}
	running := []*sequence{newSeq(), newSeq()}
	for _, q := range running {
		if !q.firstToken(t.Context()) {
			t.Fatal("firstToken failed under the cap")
		}
	}
	if got := e.kvUsage(cfg.KVCacheBlocks); got != 0.2 {
		t.Errorf("kv usage %v with 2 sequences of 2 blocks in 20, want 0.2", got)
	}

	admitted := make(chan int, 4)
	cancels := make([]context.CancelFunc, 4)
	waiters := make([]*sequence, 4)
	for i := range 4 {
		ctx, cancel := context.WithCancel(t.Context())
		cancels[i], waiters[i] = cancel, newSeq()
		go func() {
			if waiters[i].firstToken(ctx) {
				admitted <- i
			} else {
				admitted <- -1 - i
			}
		}()
		waitFor(t, "the request to wait", func() bool { return e.waiting.Load() == int64(i+1) })
	}
	if e.running.Load() != 2 {
		t.Errorf("running %d, want 2", e.running.Load())
	}

	cancels[0]() // the first in line leaves: the others move up
	if got := <-admitted; got != -1 {
		t.Fatalf("cancelled waiter: %d", got)
	}
	waiters[0].end()
	if e.waiting.Load() != 3 || e.running.Load() != 2 {
		t.Errorf("after a cancel: waiting %d running %d, want 3 and 2", e.waiting.Load(), e.running.Load())
	}
	for _, want := range []int{1, 2} {
		running[0].end()
		running = append(running[1:], waiters[want])
		if got := <-admitted; got != want {
			t.Fatalf("admitted %d, want %d", got, want)
		}
	}
	if e.waiting.Load() != 1 || e.running.Load() != 2 {
		t.Errorf("waiting %d running %d, want 1 and 2", e.waiting.Load(), e.running.Load())
	}
	cancels[3]()
	if got := <-admitted; got != -4 {
		t.Fatalf("cancelled waiter: %d", got)
	}
	waiters[3].end()
	for _, q := range running {
		q.end()
	}
	if e.running.Load() != 0 || e.waiting.Load() != 0 || e.kvUsage(cfg.KVCacheBlocks) != 0 {
		t.Errorf("running %d waiting %d kv %v at the end", e.running.Load(), e.waiting.Load(), e.kvUsage(cfg.KVCacheBlocks))
	}
	for _, c := range cancels {
		c()
	}
}

// TestChatSeqCapOverHTTP holds the only sequence slot with a slow reply,
// queues a second request, and lets both clients leave: nothing stays
// running or waiting, and a later request is served.
func TestChatSeqCapOverHTTP(t *testing.T) {
	ts, sim := start(t, Config{MaxNumSeqs: 1, Tokens: 2, ITL: Duration(time.Hour)})
	post := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(hello))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("answered %d, want the client to give up first", resp.StatusCode)
		}
	}
	ctx1, cancel1 := context.WithCancel(t.Context())
	ctx2, cancel2 := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { post(ctx1) })
	waitStats(t, sim, "one running", func(st Stats) bool { return st.Running == 1 })
	wg.Go(func() { post(ctx2) })
	st := waitStats(t, sim, "one waiting", func(st Stats) bool { return st.Waiting == 1 })
	if st.Running != 1 || st.InFlight != 2 {
		t.Errorf("stats %+v, want 1 running and 2 in flight", st)
	}
	cancel2()
	waitStats(t, sim, "the waiter gone", func(st Stats) bool { return st.Waiting == 0 && st.Cancelled == 1 })
	cancel1()
	wg.Wait()
	st = waitStats(t, sim, "the runner gone", func(st Stats) bool { return st.Running == 0 && st.InFlight == 0 })
	if st.Cancelled != 2 || st.KVCacheUsage != 0 {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, st)

	do(t, http.MethodPost, ts.URL+"/sim/config", `{"itl":"0s"}`)
	complete(t, ts.URL, hello)
}

// TestChatPrefixCacheStats follows a conversation over HTTP: turn 2 hits
// turn 1's blocks, stats and the prefix counters agree, and /sim/reset
// starts the cache cold.
func TestChatPrefixCacheStats(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 5})
	turn1 := []api.Message{{Role: "system", Content: wordsText(0, 60)}, {Role: "user", Content: wordsText(1, 30)}}
	body := func(msgs []api.Message) string {
		b, _ := json.Marshal(map[string]any{"messages": msgs})
		return string(b)
	}
	a1 := complete(t, ts.URL, body(turn1))
	n1 := a1.Usage.PromptTokens // 98: 6 blocks of 16
	if n1 != promptTokens(turn1) {
		t.Fatalf("prompt_tokens %d, want %d", n1, promptTokens(turn1))
	}
	turn2 := append(slices.Clone(turn1), api.Message{Role: "assistant", Content: a1.Choices[0].Message.Content},
		api.Message{Role: "user", Content: "tell me more"})
	n2 := complete(t, ts.URL, body(turn2)).Usage.PromptTokens

	st := sim.Stats()
	wantHits := int64(n1 / 16 * 16)
	if st.PrefixCacheQueries != int64(n1+n2) || st.PrefixCacheHits != wantHits {
		t.Errorf("queries %d hits %d, want %d and %d", st.PrefixCacheQueries, st.PrefixCacheHits, n1+n2, wantHits)
	}
	if st.PrefixCacheBlocks != n2/16 {
		t.Errorf("%d blocks cached, want %d", st.PrefixCacheBlocks, n2/16)
	}

	do(t, http.MethodPost, ts.URL+"/sim/reset", "")
	if st = sim.Stats(); st.PrefixCacheBlocks != 0 || st.PrefixCacheQueries != 0 || st.PrefixCacheHits != 0 {
		t.Errorf("after reset: %+v", st)
	}
	complete(t, ts.URL, body(turn2))
	if st = sim.Stats(); st.PrefixCacheHits != 0 || st.PrefixCacheQueries != int64(n2) {
		t.Errorf("after reset, turn 2 again: queries %d hits %d, want %d and 0", st.PrefixCacheQueries, st.PrefixCacheHits, n2)
	}

	// Turning the cache off stops the counting; a new block size starts
	// over.
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"no_prefix_cache":true}`)
	complete(t, ts.URL, body(turn2))
	if st = sim.Stats(); st.PrefixCacheQueries != int64(n2) {
		t.Errorf("with the cache off, queries went from %d to %d", n2, st.PrefixCacheQueries)
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"no_prefix_cache":false,"block_size":8}`)
	if st = sim.Stats(); st.PrefixCacheBlocks != 0 {
		t.Errorf("%d blocks cached after changing the block size", st.PrefixCacheBlocks)
	}
}

// BenchmarkEnginePass is the engine's cost per request with the defaults
// (no prefill time, no cap) and a short prompt, as in the gateway's
// benchmark.
func BenchmarkEnginePass(b *testing.B) {
	cfg := engineCfg(Config{})
	e := newEngine(cfg)
	msgs := []api.Message{{Role: "user", Content: "hello there, how are you today?"}}
	p := plan{Prompt: msgs, PromptTokens: promptTokens(msgs), Tokens: make([]string, 16)}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			q := e.sequence(cfg, p)
			q.firstToken(ctx)
			q.end()
		}
	})
}

// TestStreamWaitsForPrefill streams a long prompt twice: the first chunk
// comes after the prefill, and the repeat hits the cache.
func TestStreamWaitsForPrefill(t *testing.T) {
	const per = 50 * time.Microsecond
	ts, sim := start(t, Config{PrefillPerToken: Duration(per), Tokens: 2})
	msgs := userMsgs(3, 1000)
	b, _ := json.Marshal(map[string]any{"messages": msgs, "stream": true})
	firstChunk := func() time.Duration {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(string(b)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := make([]byte, 1)
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		io.Copy(io.Discard, resp.Body)
		return took
	}
	cold := firstChunk()
	if want := time.Duration(promptTokens(msgs)) * per; cold < want {
		t.Errorf("first chunk after %s, before the prefill's %s", cold, want)
	}
	if warm := firstChunk(); warm >= cold {
		t.Errorf("warm first chunk after %s, not sooner than cold %s", warm, cold)
	}
	if st := sim.Stats(); st.PrefixCacheHits != int64((promptTokens(msgs)-1)/16*16) {
		t.Errorf("prefix cache hits %d", st.PrefixCacheHits)
	}
}

// TestChatReportsCachedTokens: with PromptTokensDetails, usage says how
// many prompt tokens the prefix cache held (vLLM's
// --enable-prompt-tokens-details), streamed or not; without, it is null.
func TestChatReportsCachedTokens(t *testing.T) {
	msgs := []api.Message{{Role: "system", Content: wordsText(0, 60)}, {Role: "user", Content: wordsText(1, 30)}}
	cases := []struct {
		name    string
		details bool
		stream  bool
		want    string // the second request's prompt_tokens_details
	}{
		{"off", false, false, `null`},
		{"non-streamed", true, false, `{"cached_tokens":96}`},
		{"streamed", true, true, `{"cached_tokens":96}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, _ := start(t, Config{Tokens: 3, PromptTokensDetails: c.details})
			req := map[string]any{"messages": msgs, "stream": c.stream}
			if c.stream {
				req["stream_options"] = map[string]any{"include_usage": true}
			}
			b, _ := json.Marshal(req)
			details := func() string {
				_, out := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", string(b))
				i := strings.LastIndex(string(out), `"prompt_tokens_details":`)
				if i < 0 {
					if !c.details {
						return "null" // a stream without details says nothing
					}
					t.Fatalf("no prompt_tokens_details in %s", out)
				}
				rest := string(out[i+len(`"prompt_tokens_details":`):])
				if strings.HasPrefix(rest, "null") {
					return "null"
				}
				return rest[:strings.IndexByte(rest, '}')+1]
			}
			first := details()
			if c.details && first != `{"cached_tokens":0}` {
				t.Errorf("cold: %s", first)
			}
			if got := details(); got != c.want {
				t.Errorf("warm: %s, want %s", got, c.want)
			}
		})
	}
}
