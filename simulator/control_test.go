package simulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestSimConfigGet(t *testing.T) {
	ts, _ := start(t, Config{})
	resp, b := do(t, http.MethodGet, ts.URL+"/sim/config", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := `{"model":"sim-model","ttft":"0s","itl":"0s","tokens":16,"seed":0,"error_rate":0,"error_status":500,"hang":false,"drop_after":0,"max_model_len":0,"api_key":"","dialect":"","loading":"0s","no_usage":false,"prompt_tokens_details":false,"usage_in_finish":false,"error_after":0,"max_concurrent":0,` +
		`"block_size":16,"kv_cache_blocks":16384,"no_prefix_cache":false,"prefix_cache":"blocks","prefill_per_token":"0s","max_num_seqs":0,"metrics_fault":""}`
	if string(b) != want {
		t.Errorf("GET /sim/config\n got %s\nwant %s", b, want)
	}
}

func TestSimConfigMerge(t *testing.T) {
	ts, sim := start(t, Config{Model: "m1", Seed: 5})
	steps := []struct {
		name  string
		patch string
		ok    bool
		want  Config // the whole config after the step
	}{
		{"partial", `{"tokens":3,"ttft":"5ms"}`, true, Config{Model: "m1", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500}},
		{"other field keeps earlier ones", `{"model":"m2","max_model_len":100}`, true, Config{Model: "m2", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500, MaxModelLen: 100}},
		{"out of range", `{"error_rate":2,"tokens":9}`, false, Config{Model: "m2", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500, MaxModelLen: 100}},
		{"unknown field", `{"tokenz":9}`, false, Config{Model: "m2", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500, MaxModelLen: 100}},
		{"bad duration", `{"itl":"soon"}`, false, Config{Model: "m2", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500, MaxModelLen: 100}},
		{"malformed", `{"tokens":`, false, Config{Model: "m2", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500, MaxModelLen: 100}},
		{"empty", ``, false, Config{Model: "m2", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500, MaxModelLen: 100}},
		{"trailing data", `{"tokens":4} {}`, false, Config{Model: "m2", Seed: 5, Tokens: 3, TTFT: Duration(5e6), ErrorStatus: 500, MaxModelLen: 100}},
		{"zero restores a default, false overrides", `{"ttft":"0s","hang":false,"max_model_len":0,"tokens":0}`, true, Config{Model: "m2", Seed: 5, Tokens: 16, ErrorStatus: 500}},
		{"tokens for the check below", `{"tokens":3}`, true, Config{Model: "m2", Seed: 5, Tokens: 3, ErrorStatus: 500}},
	}
	for _, st := range steps {
		st.want = st.want.withDefaults() // the engine model's defaults
		resp, b := do(t, http.MethodPost, ts.URL+"/sim/config", st.patch)
		if st.ok {
			if resp.StatusCode != 200 {
				t.Fatalf("%s: status %d: %s", st.name, resp.StatusCode, b)
			}
			if got := decode[Config](t, b); got != st.want {
				t.Errorf("%s: answer %+v, want %+v", st.name, got, st.want)
			}
		} else if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400", st.name, resp.StatusCode)
		} else {
			errorShape(t, b, 400, "BadRequestError")
		}
		if got := sim.Config(); got != st.want {
			t.Errorf("%s: config %+v, want %+v", st.name, got, st.want)
		}
	}
	// The merged config drives the next answers.
	c := complete(t, ts.URL, hello)
	if c.Model != "m2" || c.Usage.CompletionTokens != 3 {
		t.Errorf("answer model %q tokens %d, want m2 and 3", c.Model, c.Usage.CompletionTokens)
	}
}

// TestSimConfigDialectDefaults: fields left zero take the dialect's
// defaults, also when the dialect changes at run time; fields set keep
// their value across the change until set to zero.
func TestSimConfigDialectDefaults(t *testing.T) {
	ts, _ := start(t, Config{})
	type engineFields struct {
		BlockSize   int    `json:"block_size"`
		PrefixCache string `json:"prefix_cache"`
		MaxNumSeqs  int    `json:"max_num_seqs"`
	}
	vllm := engineFields{DefaultBlockSize, PrefixCacheBlocks, 0}
	ollama := engineFields{1, PrefixCacheSlots, 1}
	steps := []struct {
		patch string
		want  engineFields
	}{
		{`{"dialect":"ollama"}`, ollama},
		{`{"dialect":"vllm"}`, vllm},
		{`{"dialect":"ollama","max_num_seqs":3}`, engineFields{1, PrefixCacheSlots, 3}},
		{`{"dialect":"sglang"}`, engineFields{DefaultBlockSize, PrefixCacheBlocks, 3}},
		{`{"max_num_seqs":0,"prefix_cache":"slots"}`, engineFields{DefaultBlockSize, PrefixCacheSlots, 0}},
		{`{"dialect":"ollama","prefix_cache":""}`, ollama},
	}
	for _, st := range steps {
		resp, b := do(t, http.MethodPost, ts.URL+"/sim/config", st.patch)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", st.patch, resp.StatusCode, b)
		}
		if got := decode[engineFields](t, b); got != st.want {
			t.Errorf("after %s: %+v, want %+v", st.patch, got, st.want)
		}
		if _, b := do(t, http.MethodGet, ts.URL+"/sim/config", ""); decode[engineFields](t, b) != st.want {
			t.Errorf("GET after %s: %s", st.patch, b)
		}
	}
	if resp, b := do(t, http.MethodPost, ts.URL+"/sim/config", `{"prefix_cache":"lru"}`); resp.StatusCode != 400 || !strings.Contains(string(b), "prefix_cache") {
		t.Errorf("unknown prefix cache kind: %d %s", resp.StatusCode, b)
	}
}

func TestSimStatsAndReset(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 2})
	complete(t, ts.URL, hello)
	do(t, http.MethodPost, ts.URL+"/v1/chat/completions", `{"messages":[`)
	body := `{"model":"x","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],` +
		`"temperature":0.25,"stream":true,"max_tokens":5,"stream_options":{"include_usage":true}}`
	resp, _ := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", body, "Authorization", "Bearer k")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}

	_, b := do(t, http.MethodGet, ts.URL+"/sim/stats", "")
	// Prompt tokens queried: 6 (hello) + 11 (system "be brief", user "hi").
	want := `{"requests":3,"completed":2,"cancelled":0,"errors":0,"rejected":1,"dropped":0,"health_checks":0,"in_flight":0,` +
		`"running":0,"waiting":0,"preemptions":0,"prefix_cache_queries":17,"prefix_cache_hits":0,"prefix_cache_blocks":0,"kv_cache_usage":0,"metrics_scrapes":0,"last_request":` +
		`{"model":"x","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],` +
		`"temperature":0.25,"stream":true,"max_tokens":5,"max_completion_tokens":null,"include_usage":true,"has_authorization":true},` +
		`"endpoints":{"/v1/chat/completions":{"requests":3,"completed":2,"cancelled":0,"errors":0,"rejected":1,"dropped":0,"in_flight":0}}}`
	if string(b) != want {
		t.Errorf("GET /sim/stats\n got %s\nwant %s", b, want)
	}

	complete(t, ts.URL, hello)
	_, b = do(t, http.MethodGet, ts.URL+"/sim/stats", "")
	lr := decode[Stats](t, b).LastRequest
	if lr.Temperature != nil || lr.MaxTokens != nil || lr.Stream || lr.IncludeUsage || lr.HasAuthorization {
		t.Errorf("unset fields recorded: %+v", lr)
	}

	resp, b = do(t, http.MethodPost, ts.URL+"/sim/reset", "")
	zero := `{"requests":0,"completed":0,"cancelled":0,"errors":0,"rejected":0,"dropped":0,"health_checks":0,"in_flight":0,` +
		`"running":0,"waiting":0,"preemptions":0,"prefix_cache_queries":0,"prefix_cache_hits":0,"prefix_cache_blocks":0,"kv_cache_usage":0,"metrics_scrapes":0,"last_request":null}`
	if resp.StatusCode != 200 || string(b) != zero {
		t.Errorf("POST /sim/reset: %d %s", resp.StatusCode, b)
	}
	if _, b = do(t, http.MethodGet, ts.URL+"/sim/stats", ""); string(b) != zero {
		t.Errorf("stats after reset %s", b)
	}
	if resp, _ = do(t, http.MethodGet, ts.URL+"/sim/reset", ""); resp.StatusCode != 405 {
		t.Errorf("GET /sim/reset: %d, want 405", resp.StatusCode)
	}
}

// TestConcurrentControl changes the config and reads the stats while chat
// requests run; the race detector checks the locking.
func TestConcurrentControl(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 3})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 10 {
				resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", chatWith(t, map[string]any{"stream": i%2 == 0}))
				if resp.StatusCode != 200 {
					t.Errorf("status %d: %s", resp.StatusCode, b)
				}
			}
		})
	}
	for i := range 2 {
		wg.Go(func() {
			for j := range 20 {
				// Switching the cache kind and the sequence cap under
				// load too.
				patch, _ := json.Marshal(map[string]any{"tokens": 1 + (i+j)%4,
					"prefix_cache": []string{PrefixCacheBlocks, PrefixCacheSlots}[j%2], "max_num_seqs": (i + j) % 3})
				do(t, http.MethodPost, ts.URL+"/sim/config", string(patch))
				do(t, http.MethodGet, ts.URL+"/sim/stats", "")
			}
		})
	}
	wg.Wait()
	st := sim.Stats()
	if st.Requests != 80 || st.Completed != 80 {
		t.Errorf("stats %+v", st)
	}
	if !strings.Contains(string(encodeJSON(st)), `"in_flight":0`) {
		t.Errorf("stats %+v", st)
	}
}
