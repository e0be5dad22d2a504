package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
)

// The tests below hold the ollama dialect's defaults to what Ollama v0.17
// was measured doing (README, "Tests against a real engine"), and the
// other dialects to what they did before.

// dialectRequest returns the path and body of a chat request of msgs in
// dialect d's own format, with extra's fields added.
func dialectRequest(t *testing.T, d string, msgs []api.Message, stream bool, extra map[string]any) (string, string) {
	t.Helper()
	body := map[string]any{"messages": msgs, "stream": stream}
	path := "/v1/chat/completions"
	switch d {
	case DialectOllama:
		path = "/api/chat"
	case DialectNative:
		path = "/tasks/assistant_inference"
	}
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return path, string(b)
}

// dialectUsage is the token counts an answer reports, read from any
// dialect's non-streamed answer or from a stream's last line or event
// that carries them.
type dialectUsage struct{ prompt, completion int }

func readUsage(t *testing.T, d string, body []byte) dialectUsage {
	t.Helper()
	var last string
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		line = strings.TrimPrefix(line, "data: ")
		if strings.Contains(line, "_count") || strings.Contains(line, `"usage"`) {
			last = line
		}
	}
	if last == "" {
		t.Fatalf("no usage in %s", body)
	}
	var u struct {
		PromptEvalCount int `json:"prompt_eval_count"`
		EvalCount       int `json:"eval_count"`
		Usage           struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(last), &u); err != nil {
		t.Fatalf("usage line %q: %v", last, err)
	}
	if d == DialectOllama {
		return dialectUsage{u.PromptEvalCount, u.EvalCount}
	}
	return dialectUsage{u.Usage.PromptTokens, u.Usage.CompletionTokens}
}

// TestSequenceCapByDialect: Ollama runs one request at a time by default
// (OLLAMA_NUM_PARALLEL=1), so a second one waits, counted as waiting,
// until the first is done; the other engines run both at once; an
// explicit MaxNumSeqs overrides the dialect's default.
func TestSequenceCapByDialect(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		running int64 // of two requests held at once
	}{
		{"ollama: one at a time", Config{Dialect: DialectOllama}, 1},
		{"ollama with max_num_seqs 2", Config{Dialect: DialectOllama, MaxNumSeqs: 2}, 2},
		{"vllm: no cap", Config{}, 2},
		{"sglang: no cap", Config{Dialect: DialectSGLang}, 2},
		{"tgi: no cap", Config{Dialect: DialectTGI}, 2},
		{"llamacpp: no cap", Config{Dialect: DialectLlamaCpp}, 2},
		{"native: no cap", Config{Dialect: DialectNative}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A reply of 2 tokens an hour apart holds its sequence until
			// its client leaves.
			cfg := tt.cfg
			cfg.Tokens, cfg.ITL = 2, Duration(time.Hour)
			ts, sim := start(t, cfg)
			post := func(ctx context.Context, i int) {
				path, body := dialectRequest(t, cfg.Dialect, userMsgs(i, 5), false, nil)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+path, strings.NewReader(body))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					t.Errorf("request %d answered %d, want the client to give up first", i, resp.StatusCode)
				}
			}
			ctx1, cancel1 := context.WithCancel(t.Context())
			ctx2, cancel2 := context.WithCancel(t.Context())
			defer cancel1()
			defer cancel2()
			var wg sync.WaitGroup
			wg.Go(func() { post(ctx1, 1) })
			waitStats(t, sim, "the first running", func(st Stats) bool { return st.Running == 1 })
			wg.Go(func() { post(ctx2, 2) })
			st := waitStats(t, sim, "both in the engine", func(st Stats) bool { return st.Running+st.Waiting == 2 })
			if st.Running != tt.running {
				t.Errorf("running %d waiting %d, want %d running", st.Running, st.Waiting, tt.running)
			}
			// The first one leaving lets the second run.
			cancel1()
			waitStats(t, sim, "the second running", func(st Stats) bool { return st.Running == 1 && st.Waiting == 0 && st.InFlight == 1 })
			cancel2()
			wg.Wait()
			waitStats(t, sim, "nothing left", func(st Stats) bool { return st.InFlight == 0 && st.Running == 0 })
		})
	}
}

// TestOneSlotSerializesAnswers: with Ollama's one slot, two requests sent
// together are answered one after the other, the second's first token
// after the first's last, as measured (2 requests: first tokens at about
// 8 and 93 ms). Only lower bounds are checked, which a busy machine
// cannot break.
func TestOneSlotSerializesAnswers(t *testing.T) {
	const itl, tokens = 20 * time.Millisecond, 5
	ts, _ := start(t, Config{Dialect: DialectOllama, Tokens: tokens, ITL: Duration(itl)})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firsts []time.Duration // each stream's first line, since t0
	t0 := time.Now()
	for i := range 2 {
		wg.Go(func() {
			path, body := dialectRequest(t, DialectOllama, userMsgs(i, 5), true, nil)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+path, strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 1)
			if _, err := resp.Body.Read(buf); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			firsts = append(firsts, time.Since(t0))
			mu.Unlock()
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	wg.Wait()
	if len(firsts) != 2 {
		t.Fatalf("%d streams started", len(firsts))
	}
	// The later first token waited for the whole other answer: its
	// tokens-1 gaps of ITL.
	if later := max(firsts[0], firsts[1]); later < (tokens-1)*itl {
		t.Errorf("first tokens at %v: the second did not wait for the first answer (%v)", firsts, (tokens-1)*itl)
	}
}

// TestPrefixCacheByDialect: vLLM's block LRU keeps both of two
// conversations, Ollama's one prompt per slot keeps only the last (A, B,
// A: the second A misses, but for the 3 template tokens it shares with
// B), matches token by token (a repeated prompt reuses all but its last
// token), and reuses a conversation's previous turn whole. Explicit
// settings override the dialect's.
func TestPrefixCacheByDialect(t *testing.T) {
	a, b := userMsgs(0, 40), userMsgs(1, 40) // 44 tokens each
	na := promptTokens(a)
	turn2 := append(append([]api.Message{}, a...), api.Message{Role: "assistant", Content: "fine"}, api.Message{Role: "user", Content: "and then"})
	const shared = 3 // <|im_start|> user \n
	tests := []struct {
		name    string
		cfg     Config
		prompts [][]api.Message
		hits    []int64 // prompt tokens found in the cache, per request
	}{
		{"vllm: A, B, A hits A's blocks", Config{}, [][]api.Message{a, b, a}, []int64{0, 0, (int64(na) - 1) / 16 * 16}},
		{"ollama: A, B, A misses", Config{Dialect: DialectOllama}, [][]api.Message{a, b, a}, []int64{0, shared, shared}},
		{"ollama: A, A reuses all but the last token", Config{Dialect: DialectOllama}, [][]api.Message{a, a}, []int64{0, int64(na) - 1}},
		{"ollama: the next turn reuses the previous prompt", Config{Dialect: DialectOllama}, [][]api.Message{a, turn2}, []int64{0, int64(na)}},
		// One after another, every request finds the first slot the
		// longest match, as Ollama's did with 4 slots.
		{"ollama with 2 slots, one request at a time: A, B, A still misses", Config{Dialect: DialectOllama, MaxNumSeqs: 2},
			[][]api.Message{a, b, a}, []int64{0, shared, shared}},
		{"ollama with a block cache", Config{Dialect: DialectOllama, PrefixCache: PrefixCacheBlocks, BlockSize: 16},
			[][]api.Message{a, b, a}, []int64{0, 0, (int64(na) - 1) / 16 * 16}},
		{"vllm with a slot cache", Config{PrefixCache: PrefixCacheSlots, BlockSize: 1}, [][]api.Message{a, b, a}, []int64{0, shared, shared}},
		{"ollama without prefix cache", Config{Dialect: DialectOllama, NoPrefixCache: true}, [][]api.Message{a, a}, []int64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Tokens = 2
			ts, sim := start(t, cfg)
			var before int64
			for i, msgs := range tt.prompts {
				path, body := dialectRequest(t, cfg.Dialect, msgs, false, nil)
				if resp, b := do(t, http.MethodPost, ts.URL+path, body); resp.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
				}
				hits := sim.Stats().PrefixCacheHits
				if got := hits - before; got != tt.hits[i] {
					t.Errorf("request %d: %d tokens hit, want %d", i, got, tt.hits[i])
				}
				before = hits
			}
		})
	}
}

// TestPrefixCacheHitShowsInOllamaTiming: with a prefill cost, Ollama's
// prompt_eval_duration follows the tokens the slot lacked: a repeated
// prompt is prefilled in one token's time, a prompt in between makes it
// cold again.
func TestPrefixCacheHitShowsInOllamaTiming(t *testing.T) {
	const per = 100 * time.Microsecond
	ts, _ := start(t, Config{Dialect: DialectOllama, Tokens: 2, PrefillPerToken: Duration(per)})
	a, b := userMsgs(0, 400), userMsgs(1, 400)
	cold := time.Duration(promptTokens(a)-3) * per // all but the shared template tokens
	for i, step := range []struct {
		msgs []api.Message
		warm bool
	}{{a, false}, {a, true}, {b, false}, {a, false}} {
		path, body := dialectRequest(t, DialectOllama, step.msgs, false, nil)
		resp, raw := do(t, http.MethodPost, ts.URL+path, body)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, raw)
		}
		var done struct {
			PromptEvalDuration int64 `json:"prompt_eval_duration"`
		}
		if err := json.Unmarshal(raw, &done); err != nil {
			t.Fatal(err)
		}
		// The prefill is charged exactly; the duration adds only TTFT (0).
		if got := time.Duration(done.PromptEvalDuration); step.warm != (got < cold/10) || (!step.warm && got < cold) {
			t.Errorf("request %d: prompt_eval_duration %v, warm %v (cold prefill %v)", i, got, step.warm, cold)
		}
	}
}

// TestOllamaTruncatesLongPrompts: Ollama does not refuse a prompt longer
// than its context (num_ctx): it drops the oldest messages (keeping
// system ones) until the rest fits, then, if the last message alone is
// too long, keeps its first 4 tokens and its end; it answers 200, and
// prompt_eval_count is the prompt it ran. Nor does it refuse num_predict
// beyond what is left (it shifts its context). The vLLM dialect still
// answers 400. A truncated prompt is cached as run, so repeating it hits.
func TestOllamaTruncatesLongPrompts(t *testing.T) {
	long := userMsgs(0, 20) // 24 tokens
	conv := []api.Message{
		{Role: "system", Content: "be brief"},          // 6
		{Role: "user", Content: wordsText(1, 10)},      // 14
		{Role: "assistant", Content: "fine thanks"},    // 6
		{Role: "user", Content: "and now the third"},   // 8
		{Role: "assistant", Content: "yes"},            // 5
		{Role: "user", Content: "what about the end?"}, // 8
	} // 47 tokens
	longLast := []api.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}, {Role: "user", Content: wordsText(2, 30)}} // 6+5+34
	tests := []struct {
		name    string
		dialect string
		ml      int
		msgs    []api.Message
		extra   map[string]any
		status  int
		prompt  int // prompt tokens reported
		reply   int // completion tokens reported
	}{
		{"one long message: its middle goes", DialectOllama, 10, long, nil, 200, 10, 17},
		{"a conversation loses its oldest turns, not its system prompt", DialectOllama, 30, conv, nil, 200, 6 + 8 + 5 + 8, 17},
		{"then the last message's middle", DialectOllama, 20, longLast, nil, 200, 20, 17},
		{"a prompt as long as the context runs whole", DialectOllama, 24, long, nil, 200, 24, 17},
		{"num_predict beyond what is left", DialectOllama, 30, long, map[string]any{"options": map[string]any{"num_predict": 12}}, 200, 24, 12},
		{"truncate false refuses", DialectOllama, 10, long, map[string]any{"truncate": false}, 400, 0, 0},
		{"vllm refuses", DialectVLLM, 10, long, nil, 400, 0, 0},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: "/streamed"}[stream], func(t *testing.T) {
				t.Parallel()
				ts, sim := start(t, Config{Dialect: tt.dialect, MaxModelLen: tt.ml})
				path, body := dialectRequest(t, tt.dialect, tt.msgs, stream, tt.extra)
				resp, b := do(t, http.MethodPost, ts.URL+path, body)
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
				}
				if tt.status != 200 {
					return
				}
				if u := readUsage(t, tt.dialect, b); u.prompt != tt.prompt || u.completion != tt.reply {
					t.Errorf("prompt %d completion %d, want %d and %d", u.prompt, u.completion, tt.prompt, tt.reply)
				}
				before := sim.Stats().PrefixCacheHits
				do(t, http.MethodPost, ts.URL+path, body)
				if hits := sim.Stats().PrefixCacheHits - before; hits != int64(tt.prompt-1) {
					t.Errorf("the same request again hit %d tokens, want all but the last of %d", hits, tt.prompt)
				}
			})
		}
	}
}

// TestCompletionCountsEndToken: Ollama's eval_count includes the end
// token of an answer that ended by itself (12 words, 13 tokens), not of
// one cut by num_predict; the other engines count the text's tokens.
func TestCompletionCountsEndToken(t *testing.T) {
	tests := []struct {
		dialect    string
		extra      map[string]any
		completion int
	}{
		{DialectOllama, nil, 13},
		{DialectOllama, map[string]any{"options": map[string]any{"num_predict": 5}}, 5},
		{DialectVLLM, nil, 12},
		{DialectVLLM, map[string]any{"max_tokens": 5}, 5},
		{DialectLlamaCpp, nil, 12},
		{DialectNative, nil, 12},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			extra := map[string]any{}
			for k, v := range tt.extra {
				extra[k] = v
			}
			if stream && tt.dialect == DialectVLLM {
				extra["stream_options"] = map[string]any{"include_usage": true}
			}
			path, body := dialectRequest(t, tt.dialect, userMsgs(0, 3), stream, extra)
			t.Run(fmt.Sprintf("%s %v stream=%v", tt.dialect, tt.extra, stream), func(t *testing.T) {
				t.Parallel()
				ts, _ := start(t, Config{Dialect: tt.dialect, Tokens: 12})
				resp, b := do(t, http.MethodPost, ts.URL+path, body)
				if resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				if u := readUsage(t, tt.dialect, b); u.completion != tt.completion {
					t.Errorf("completion tokens %d, want %d", u.completion, tt.completion)
				}
			})
		}
	}
}

func TestTruncateOllama(t *testing.T) {
	sys := api.Message{Role: "system", Content: "be brief"} // 6 tokens
	u := func(n int) api.Message { return api.Message{Role: "user", Content: wordsText(n, n)} }
	tests := []struct {
		name   string
		msgs   []api.Message
		ml     int
		kept   []api.Message
		cut    promptCut
		tokens int
	}{
		{"drop the first turn", []api.Message{u(6), u(2), u(3)}, 15, []api.Message{u(2), u(3)}, promptCut{}, 13},
		{"system messages stay", []api.Message{u(6), sys, u(6), u(2)}, 16, []api.Message{sys, u(2)}, promptCut{}, 12},
		{"the last message is cut in the middle", []api.Message{u(6), u(20)}, 10, []api.Message{u(20)}, promptCut{from: 4, n: 14}, 10},
		{"a tiny context keeps no head", []api.Message{u(20)}, 1, []api.Message{u(20)}, promptCut{from: 0, n: 23}, 1},
	}
	for _, tt := range tests {
		kept, cut, n := truncateOllama(tt.msgs, tt.ml)
		if len(kept) != len(tt.kept) || cut != tt.cut || n != tt.tokens {
			t.Errorf("%s: kept %d messages, cut %+v, %d tokens; want %d, %+v, %d", tt.name, len(kept), cut, n, len(tt.kept), tt.cut, tt.tokens)
			continue
		}
		for i := range kept {
			if !reflect.DeepEqual(kept[i], tt.kept[i]) {
				t.Errorf("%s: message %d is %+v, want %+v", tt.name, i, kept[i], tt.kept[i])
			}
		}
		if blocks, count := promptBlocksCut(nil, kept, 1, cut); count != n || len(blocks) != n {
			t.Errorf("%s: the cut prompt hashes to %d tokens (%d blocks), want %d", tt.name, count, len(blocks), n)
		}
	}
}
