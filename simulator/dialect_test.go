package simulator

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// streamed is hello, streamed with usage asked for.
const streamed = `{"model":"sim-model","messages":[{"role":"user","content":"hello there"}],"stream":true,"stream_options":{"include_usage":true}}`

// Each dialect frames a streamed answer as its engine does.
func TestDialectStreamFraming(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		path    string
		body    string
		match   []string // regexps the body must match
		noMatch []string // regexps it must not match
	}{
		{"vllm: separate usage chunk", Config{Tokens: 2}, "/v1/chat/completions", streamed,
			[]string{`^data: \{"id":"chatcmpl-[0-9a-f]{32}"`, `"finish_reason":"stop","stop_reason":null\}\]\}\n\ndata: \{[^\n]*"choices":\[\],"usage":\{"prompt_tokens":6,"total_tokens":8,"completion_tokens":2\}\}\n\ndata: \[DONE\]\n\n$`},
			[]string{`(?m)^data:\{`, `(?m)^:`}},
		{"vllm: usage_in_finish", Config{Tokens: 2, UsageInFinish: true}, "/v1/chat/completions", streamed,
			[]string{`"finish_reason":"stop","stop_reason":null\}\],"usage":\{"prompt_tokens":6,"total_tokens":8,"completion_tokens":2\}\}\n\ndata: \[DONE\]\n\n$`},
			[]string{`"choices":\[\]`}},
		{"vllm: no_usage", Config{Tokens: 2, NoUsage: true}, "/v1/chat/completions", streamed,
			[]string{`data: \[DONE\]\n\n$`}, []string{`usage`}},
		{"tgi: no space, empty id, keep-alive", Config{Dialect: DialectTGI, Tokens: 2}, "/v1/chat/completions", streamed,
			[]string{`^data:\{"id":"","object":"chat.completion.chunk"`, `(?m)^:\n\n`, `"choices":\[\],"usage":\{"prompt_tokens":6`, `data:\[DONE\]\n\n$`},
			[]string{`(?m)^data: `}},
		{"tgi: error_after", Config{Dialect: DialectTGI, Tokens: 3, ErrorAfter: 1}, "/v1/chat/completions", streamed,
			[]string{`\n\ndata:\{"error":"Simulated replica failure \(error_after\).","error_type":"generation"\}\n\n$`}, []string{`DONE`}},
		{"llamacpp: usage on the finishing chunk even unasked", Config{Dialect: DialectLlamaCpp, Tokens: 2}, "/v1/chat/completions", strings.Replace(streamed, `,"stream_options":{"include_usage":true}`, "", 1),
			[]string{`"finish_reason":"stop","stop_reason":null\}\],"usage":\{"prompt_tokens":6,"total_tokens":8,"completion_tokens":2\}\}\n\ndata: \[DONE\]\n\n$`},
			[]string{`"choices":\[\]`}},
		{"llamacpp: error: line", Config{Dialect: DialectLlamaCpp, Tokens: 3, ErrorAfter: 2}, "/v1/chat/completions", streamed,
			[]string{`\n\nerror: \{"code":500,"message":"Simulated replica failure \(error_after\).","type":"server_error"\}\n\n$`}, []string{`DONE`}},
		{"sglang: flat in-band error", Config{Dialect: DialectSGLang, Tokens: 3, ErrorAfter: 1}, "/v1/chat/completions", streamed,
			[]string{`\n\ndata: \{"object":"error","message":"Simulated replica failure \(error_after\).","type":"InternalServerError","param":null,"code":500\}\n\n$`}, nil},
		// eval_count counts the end token of an answer that ended by
		// itself: 2 tokens of text, 3 counted.
		{"ollama: NDJSON with nanosecond durations", Config{Dialect: DialectOllama, Tokens: 2}, "/api/chat",
			`{"model":"m","messages":[{"role":"user","content":"hello there"}],"options":{"temperature":0.3,"num_predict":5}}`,
			[]string{`^\{"model":"sim-model","created_at":"[0-9T:.Z-]+","message":\{"role":"assistant","content":"[^"]+"\},"done":false\}\n`,
				`\n\{"model":"sim-model","created_at":"[^"]+","message":\{"role":"assistant","content":""\},"done_reason":"stop","done":true,"total_duration":[1-9][0-9]*,"load_duration":1000000,"prompt_eval_count":6,"prompt_eval_duration":[1-9][0-9]*,"eval_count":3,"eval_duration":[1-9][0-9]*\}\n$`},
			[]string{`data:`}},
		{"ollama: no_usage omits counts", Config{Dialect: DialectOllama, Tokens: 2, NoUsage: true}, "/api/chat",
			`{"model":"m","messages":[{"role":"user","content":"hello there"}]}`,
			[]string{`"done_reason":"stop","done":true,"total_duration":[0-9]+,"load_duration":1000000\}\n$`}, []string{`eval_count`}},
		{"ollama: num_predict caps, done_reason length", Config{Dialect: DialectOllama, Tokens: 5}, "/api/chat",
			`{"model":"m","messages":[{"role":"user","content":"hello there"}],"options":{"num_predict":1}}`,
			[]string{`"done_reason":"length","done":true`, `"eval_count":1,`}, nil},
		{"ollama: error line", Config{Dialect: DialectOllama, Tokens: 3, ErrorAfter: 1}, "/api/chat",
			`{"model":"m","messages":[{"role":"user","content":"hello there"}]}`,
			[]string{`"done":false\}\n\{"error":"an error was encountered while running the model: Simulated replica failure \(error_after\)."\}\n$`}, []string{`"done":true`}},
		{"native: deltas then done", Config{Dialect: DialectNative, Tokens: 2}, "/tasks/assistant_inference",
			`{"messages":[{"role":"user","content":"hello there"}],"model_type":"qwen","stream":true}`,
			[]string{`^data: \{"content":"[^"]+"\}\n\ndata: \{"content":"[^"]+"\}\n\nevent: done\ndata: \{"content":"[^"]+","model_type":"qwen","usage":\{"prompt_tokens":6,"completion_tokens":2,"total_tokens":8\},"processing_time":[0-9.e-]+,"inference_time":[0-9.e-]+,"message_count":1\}\n\n$`}, nil},
		{"native: no_usage says so", Config{Dialect: DialectNative, Tokens: 2, NoUsage: true}, "/tasks/assistant_inference",
			`{"messages":[{"role":"user","content":"hello there"}],"stream":true}`,
			[]string{`"usage":\{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0\},"usage_reported":false`}, nil},
		{"native: event: error", Config{Dialect: DialectNative, Tokens: 3, ErrorAfter: 1}, "/tasks/assistant_inference",
			`{"messages":[{"role":"user","content":"hello there"}],"stream":true}`,
			[]string{`\n\nevent: error\ndata: \{"detail":"[^"]+"\}\n\n$`}, []string{`event: done`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts, _ := start(t, tc.cfg)
			resp, b := do(t, http.MethodPost, ts.URL+tc.path, tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			for _, re := range tc.match {
				if !regexp.MustCompile(re).Match(b) {
					t.Errorf("body does not match %s:\n%s", re, b)
				}
			}
			for _, re := range tc.noMatch {
				if regexp.MustCompile(re).Match(b) {
					t.Errorf("body matches %s:\n%s", re, b)
				}
			}
		})
	}
}

// Errors, loading, health and overload answers in each engine's shape.
func TestDialectAnswers(t *testing.T) {
	long := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("word ", 20) + `"}]}`
	cases := []struct {
		name   string
		cfg    Config
		method string
		path   string
		body   string
		status int
		want   string // exact body
	}{
		{"vllm health", Config{}, "GET", "/health", "", 200, ""},
		{"llamacpp health", Config{Dialect: DialectLlamaCpp}, "GET", "/health", "", 200, `{"status":"ok"}`},
		{"llamacpp loading", Config{Dialect: DialectLlamaCpp, Loading: Duration(time.Hour)}, "GET", "/health", "", 503,
			`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`},
		{"llamacpp chat while loading", Config{Dialect: DialectLlamaCpp, Loading: Duration(time.Hour)}, "POST", "/v1/chat/completions", hello, 503,
			`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`},
		{"tgi loading", Config{Dialect: DialectTGI, Loading: Duration(time.Hour)}, "GET", "/health", "", 503,
			`{"error":"unhealthy","error_type":"healthcheck"}`},
		{"sglang starting", Config{Dialect: DialectSGLang, Loading: Duration(time.Hour)}, "GET", "/health_generate", "", 503,
			`{"object":"error","message":"Server is starting.","type":"ServiceUnavailableError","param":null,"code":503}`},
		{"ollama root", Config{Dialect: DialectOllama}, "GET", "/", "", 200, "Ollama is running"},
		{"native healthz", Config{Dialect: DialectNative}, "GET", "/healthz", "", 200, `{"status":"ok"}`},
		{"tgi overloaded", Config{Dialect: DialectTGI, ErrorRate: 1, ErrorStatus: 429}, "POST", "/v1/chat/completions", hello, 429,
			`{"error":"Model is overloaded","error_type":"overloaded"}`},
		{"ollama queue full", Config{Dialect: DialectOllama, ErrorRate: 1, ErrorStatus: 503}, "POST", "/api/chat", hello, 503,
			`{"error":"server busy, please try again.  maximum pending requests exceeded"}`},
		{"vllm context length", Config{MaxModelLen: 10}, "POST", "/v1/chat/completions", long, 400,
			`{"error":{"message":"This model's maximum context length is 10 tokens. However, your request has 24 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}`},
		{"sglang context length", Config{Dialect: DialectSGLang, MaxModelLen: 10}, "POST", "/v1/chat/completions", long, 400,
			`{"object":"error","message":"The input (24 tokens) is longer than the model's context length (10 tokens).","type":"BadRequestError","param":null,"code":400}`},
		{"tgi context length", Config{Dialect: DialectTGI, MaxModelLen: 10}, "POST", "/v1/chat/completions", long, 422,
			"{\"error\":\"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 10. Given: 24 `inputs` tokens and 0 `max_new_tokens`\",\"error_type\":\"validation\"}"},
		{"llamacpp context length", Config{Dialect: DialectLlamaCpp, MaxModelLen: 10}, "POST", "/v1/chat/completions", long, 400,
			`{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"invalid_request_error"}}`},
		// Ollama truncates instead (TestOllamaTruncatesLongPrompts),
		// unless the request asks it not to.
		{"ollama context length, truncate false", Config{Dialect: DialectOllama, MaxModelLen: 10}, "POST", "/api/chat",
			strings.Replace(long, `{"model":"m",`, `{"model":"m","truncate":false,`, 1), 400,
			`{"error":"the input length exceeds the context length"}`},
		{"native context length", Config{Dialect: DialectNative, MaxModelLen: 10}, "POST", "/tasks/assistant_inference", long, 422,
			`{"detail":"The model rejected the request: This model's maximum context length is 10 tokens. However, your request has 24 input tokens. Please reduce the length of the input messages."}`},
		{"vllm non-streamed no_usage", Config{Tokens: 1, NoUsage: true, Seed: 1}, "POST", "/v1/chat/completions", hello, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts, _ := start(t, tc.cfg)
			resp, b := do(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.name == "vllm non-streamed no_usage" {
				if m := decode[map[string]any](t, b); m["usage"] != nil || m["choices"] == nil {
					t.Errorf("usage present or choices missing: %s", b)
				}
				return
			}
			if string(b) != tc.want {
				t.Errorf("body\n%s\nwant\n%s", b, tc.want)
			}
		})
	}
}

// TGI refuses requests over max_concurrent with 429 "overloaded".
func TestDialectMaxConcurrent(t *testing.T) {
	ts, sim := start(t, Config{Dialect: DialectTGI, MaxConcurrent: 1, Hang: true})
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/v1/chat/completions", strings.NewReader(hello))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitStats(t, sim, "one in flight", func(st Stats) bool { return st.InFlight == 1 })
	resp, b := do(t, "POST", ts.URL+"/v1/chat/completions", hello)
	if resp.StatusCode != 429 || string(b) != `{"error":"Model is overloaded","error_type":"overloaded"}` {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// Loading set through /sim/config starts a new loading period; it ends by itself.
func TestDialectLoadingViaConfig(t *testing.T) {
	ts, sim := start(t, Config{Dialect: DialectLlamaCpp})
	if resp, b := do(t, "POST", ts.URL+"/sim/config", `{"loading":"1s"}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if resp, _ := do(t, "GET", ts.URL+"/health", ""); resp.StatusCode != 503 {
		t.Fatalf("health while loading: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "POST", ts.URL+"/v1/chat/completions", hello); resp.StatusCode != 503 {
		t.Fatalf("chat while loading: %d", resp.StatusCode)
	}
	if st := sim.Stats(); st.Requests != 1 || st.Rejected != 1 || st.HealthChecks != 1 {
		t.Errorf("a chat request while loading is not counted as rejected: %+v", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := do(t, "GET", ts.URL+"/health", "")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still loading")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp, b := do(t, "POST", ts.URL+"/sim/config", `{"dialect":"klingon"}`); resp.StatusCode != 400 || !strings.Contains(string(b), "dialect must be one of") {
		t.Fatalf("bad dialect: %d %s", resp.StatusCode, b)
	}
}
