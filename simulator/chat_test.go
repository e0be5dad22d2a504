package simulator

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
)

func TestChatNonStreamed(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 5, Seed: 7})
	resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", hello)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	c := decode[completionBody](t, b)
	want := strings.Join(replyTokens(7, []api.Message{{Role: "user", Content: "hello there"}}, 5), "")
	if !strings.HasPrefix(c.ID, "chatcmpl-") || len(c.ID) != len("chatcmpl-")+32 {
		t.Errorf("id %q", c.ID)
	}
	if c.Object != "chat.completion" || c.Model != "sim-model" {
		t.Errorf("object %q model %q", c.Object, c.Model)
	}
	if d := time.Since(time.Unix(c.Created, 0)); d < -time.Minute || d > time.Minute {
		t.Errorf("created %d is not now", c.Created)
	}
	ch := c.Choices[0]
	if ch.Index != 0 || ch.Message.Role != "assistant" || ch.Message.Content != want || ch.FinishReason != "stop" {
		t.Errorf("choice %+v, want content %q finish stop", ch, want)
	}
	if len(strings.Fields(ch.Message.Content)) != 5 {
		t.Errorf("content %q has not 5 words", ch.Message.Content)
	}
	if u := c.Usage; u.PromptTokens != 6 || u.CompletionTokens != 5 || u.TotalTokens != 11 {
		t.Errorf("usage %+v, want 6+5=11", u)
	}
	// vLLM's field layout, byte for byte.
	for _, frag := range []string{
		`,"object":"chat.completion","created":`,
		`"choices":[{"index":0,"message":{"role":"assistant","content":"` + want + `","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}]`,
		`"usage":{"prompt_tokens":6,"total_tokens":11,"completion_tokens":5,"prompt_tokens_details":null}}`,
	} {
		if !strings.Contains(string(b), frag) {
			t.Errorf("body %s lacks %s", b, frag)
		}
	}
	st := sim.Stats()
	if st.Requests != 1 || st.Completed != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestChatMaxTokens(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 8})
	full := complete(t, ts.URL, hello).Choices[0].Message.Content
	tests := []struct {
		name       string
		extra      map[string]any
		wantN      int
		wantFinish string
	}{
		{"no cap", nil, 8, "stop"},
		{"max_tokens caps", map[string]any{"max_tokens": 3}, 3, "length"},
		{"max_tokens equal", map[string]any{"max_tokens": 8}, 8, "stop"},
		{"max_tokens above", map[string]any{"max_tokens": 100}, 8, "stop"},
		{"max_completion_tokens caps", map[string]any{"max_completion_tokens": 1}, 1, "length"},
		{"max_completion_tokens wins", map[string]any{"max_tokens": 5, "max_completion_tokens": 2}, 2, "length"},
		{"temperature is only recorded", map[string]any{"temperature": 1.7, "max_tokens": 4}, 4, "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := complete(t, ts.URL, chatWith(t, tt.extra))
			got := c.Choices[0]
			if n := len(strings.Fields(got.Message.Content)); n != tt.wantN || c.Usage.CompletionTokens != tt.wantN {
				t.Errorf("%d words, completion_tokens %d; want %d", n, c.Usage.CompletionTokens, tt.wantN)
			}
			if got.FinishReason != tt.wantFinish {
				t.Errorf("finish_reason %q, want %q", got.FinishReason, tt.wantFinish)
			}
			if !strings.HasPrefix(full, got.Message.Content) {
				t.Errorf("capped reply %q is not a prefix of %q", got.Message.Content, full)
			}
		})
	}
}

func TestChatDeterministic(t *testing.T) {
	a, _ := start(t, Config{Seed: 42})
	b, _ := start(t, Config{Seed: 42})
	c, _ := start(t, Config{Seed: 43})
	other := `{"messages":[{"role":"user","content":"something else"}]}`
	reply := func(url, body string) string { return complete(t, url, body).Choices[0].Message.Content }

	first := reply(a.URL, hello)
	if again := reply(a.URL, hello); again != first {
		t.Errorf("same server, same request: %q then %q", first, again)
	}
	if twin := reply(b.URL, hello); twin != first {
		t.Errorf("same seed on another server: %q vs %q", twin, first)
	}
	if diff := reply(c.URL, hello); diff == first {
		t.Errorf("another seed gave the same reply %q", diff)
	}
	if diff := reply(a.URL, other); diff == first {
		t.Errorf("other messages gave the same reply %q", diff)
	}
}

func TestChatBadRequests(t *testing.T) {
	ts, sim := start(t, Config{})
	tests := []struct{ name, body, wantMsg string }{
		{"malformed JSON", `{"messages":[`, "invalid JSON"},
		{"not an object", `[1,2]`, "invalid JSON"},
		{"missing messages", `{"model":"sim-model"}`, "messages"},
		{"null messages", `{"messages":null}`, "messages"},
		{"empty messages", `{"messages":[]}`, "messages"},
		{"messages not a list", `{"messages":"hi"}`, "invalid JSON"},
		{"message without role", `{"messages":[{"content":"hi"}]}`, "role"},
		{"content of wrong type", `{"messages":[{"role":"user","content":1}]}`, "content"},
		{"stream_options without stream", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, "stream=True"},
		{"stream_options with stream false", `{"messages":[{"role":"user","content":"hi"}],"stream":false,"stream_options":{"include_usage":false}}`, "stream=True"},
		{"max_tokens 0", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, "max_tokens must be at least 1"},
		{"max_completion_tokens negative", `{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":-1}`, "max_completion_tokens"},
		{"temperature of wrong type", `{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, "temperature"},
		{"negative temperature", `{"messages":[{"role":"user","content":"hi"}],"temperature":-1}`, "temperature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", tt.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
			}
			if msg := errorShape(t, b, 400, "BadRequestError"); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message %q lacks %q", msg, tt.wantMsg)
			}
		})
	}
	st := sim.Stats()
	if st.Rejected != int64(len(tests)) || st.Completed != 0 {
		t.Errorf("stats %+v, want %d rejected", st, len(tests))
	}
	checkAccounting(t, st)
}

func TestChatAcceptedVariants(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 2})
	tests := []struct{ name, body string }{
		{"null stream_options", `{"messages":[{"role":"user","content":"hi"}],"stream_options":null}`},
		{"empty stream_options", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{}}`},
		{"content parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]}]}`},
		{"null content", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null}]}`},
		{"unknown fields", `{"messages":[{"role":"user","content":"hi"}],"top_p":0.9,"n":1,"user":"u"}`},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c := complete(t, ts.URL, tt.body); c.Usage.CompletionTokens != 2 {
				t.Errorf("usage %+v", c.Usage)
			}
		})
	}
	// Text parts count as the message content.
	complete(t, ts.URL, tests[2].body)
	if lr := sim.Stats().LastRequest; lr == nil || lr.Messages[0].Content != "hi" {
		t.Errorf("last request %+v, want content parts flattened to \"hi\"", lr)
	}
}

func TestChatContextLength(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 8, MaxModelLen: 10})
	msg := func(words int) string {
		return fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]`, strings.Repeat("w ", words))
	}
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantMsg    string
		wantN      int
		wantFinish string
	}{
		{"cut to what is left", msg(2) + `}`, 200, "", 4, "length"},
		{"max_tokens that fits", msg(2) + `,"max_tokens":4}`, 200, "", 4, "length"},
		{"max_tokens too large", msg(2) + `,"max_tokens":5}`, 400,
			"'max_tokens' or 'max_completion_tokens' is too large: 5. This model's maximum context length is 10 tokens and your request has 6 input tokens (5 > 10 - 6).", 0, ""},
		{"prompt fills the context", msg(6) + `}`, 400,
			"This model's maximum context length is 10 tokens. However, your request has 10 input tokens. Please reduce the length of the input messages.", 0, ""},
		{"prompt above the context", msg(20) + `,"stream":true}`, 400,
			"However, your request has 24 input tokens.", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			if tt.wantStatus != 200 {
				if msg := errorShape(t, b, 400, "BadRequestError"); !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("message %q lacks %q", msg, tt.wantMsg)
				}
				return
			}
			c := decode[completionBody](t, b)
			if c.Usage.CompletionTokens != tt.wantN || c.Choices[0].FinishReason != tt.wantFinish {
				t.Errorf("completion_tokens %d finish %q, want %d %q", c.Usage.CompletionTokens, c.Choices[0].FinishReason, tt.wantN, tt.wantFinish)
			}
		})
	}
	if st := sim.Stats(); st.Rejected != 3 || st.Completed != 2 {
		t.Errorf("stats %+v, want 3 rejected and 2 completed", st)
	}
}

func TestChatTiming(t *testing.T) {
	const ttft, itl, n = 60 * time.Millisecond, 20 * time.Millisecond, 4
	ts, _ := start(t, Config{TTFT: Duration(ttft), ITL: Duration(itl), Tokens: n})
	for _, stream := range []bool{false, true} {
		t0 := time.Now()
		resp, _ := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", chatWith(t, map[string]any{"stream": stream}))
		if resp.StatusCode != 200 {
			t.Fatalf("stream=%v: status %d", stream, resp.StatusCode)
		}
		if d, want := time.Since(t0), ttft+(n-1)*itl; d < want {
			t.Errorf("stream=%v: answered in %v, want at least %v", stream, d, want)
		}
	}
}

func TestChatRecordsTraceparent(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 2})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct{ sent, want string }{{tp, tp}, {"", ""}} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if tc.sent != "" {
			req.Header.Set("Traceparent", tc.sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if lr := sim.Stats().LastRequest; lr == nil || lr.Traceparent != tc.want {
			t.Errorf("sent traceparent %q: recorded %+v", tc.sent, lr)
		}
	}
}
