package simulator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"
)

// parseSSE splits a stream body into event payloads, checking that every
// event is exactly "data: <payload>\n\n". rest is an unterminated tail.
func parseSSE(t *testing.T, body string) (payloads []string, rest string) {
	t.Helper()
	for {
		ev, after, ok := strings.Cut(body, "\n\n")
		if !ok {
			return payloads, body
		}
		data, isData := strings.CutPrefix(ev, "data: ")
		if !isData || strings.Contains(ev, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		payloads = append(payloads, data)
		body = after
	}
}

// streamChunk is a streamed payload as a client reads it.
type streamChunk struct {
	ID      string                       `json:"id"`
	Object  string                       `json:"object"`
	Created int64                        `json:"created"`
	Model   string                       `json:"model"`
	Choices []map[string]json.RawMessage `json:"choices"`
	Usage   *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func TestStreamFraming(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 5, Seed: 3})
	tests := []struct {
		name         string
		extra        map[string]any
		includeUsage bool
		wantN        int
		wantFinish   string
	}{
		{"plain", map[string]any{}, false, 5, "stop"},
		{"include_usage", map[string]any{"stream_options": map[string]any{"include_usage": true}}, true, 5, "stop"},
		{"include_usage false", map[string]any{"stream_options": map[string]any{"include_usage": false}}, false, 5, "stop"},
		{"max_tokens with usage", map[string]any{"max_tokens": 3, "stream_options": map[string]any{"include_usage": true}}, true, 3, "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.extra["stream"] = true
			body := chatWith(t, tt.extra)
			tt.extra["stream"] = false
			delete(tt.extra, "stream_options")
			want := complete(t, ts.URL, chatWith(t, tt.extra)).Choices[0].Message.Content

			resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" || params["charset"] != "utf-8" {
				t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if !strings.HasSuffix(string(b), "\n\ndata: [DONE]\n\n") {
				t.Errorf("body does not end with data: [DONE]: %q", b)
			}
			payloads, rest := parseSSE(t, string(b))
			if rest != "" {
				t.Errorf("trailing bytes %q", rest)
			}
			wantEvents := 1 + tt.wantN + 1 + 1 // role, tokens, finish, [DONE]
			if tt.includeUsage {
				wantEvents++
			}
			if len(payloads) != wantEvents {
				t.Fatalf("%d events, want %d: %q", len(payloads), wantEvents, payloads)
			}
			if payloads[len(payloads)-1] != "[DONE]" {
				t.Fatalf("last event %q", payloads[len(payloads)-1])
			}
			chunks := make([]streamChunk, len(payloads)-1)
			for i, p := range payloads[:len(payloads)-1] {
				chunks[i] = decode[streamChunk](t, []byte(p))
				c := chunks[i]
				if c.ID != chunks[0].ID || c.Created != chunks[0].Created || c.Object != "chat.completion.chunk" || c.Model != "sim-model" {
					t.Errorf("chunk %d header %+v differs from chunk 0", i, c)
				}
				isUsage := tt.includeUsage && i == len(chunks)-1
				if (c.Usage != nil) != isUsage || strings.Contains(p, `"usage"`) != isUsage {
					t.Errorf("chunk %d: usage present %v, want %v: %s", i, c.Usage != nil, isUsage, p)
				}
			}

			// The role chunk, byte for byte as vLLM writes it.
			wantRole := fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":%d,"model":"sim-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
				chunks[0].ID, chunks[0].Created)
			if payloads[0] != wantRole {
				t.Errorf("role chunk\n got %s\nwant %s", payloads[0], wantRole)
			}
			var text strings.Builder
			for i := 1; i <= tt.wantN; i++ {
				ch := chunks[i].Choices
				var d map[string]string
				if len(ch) != 1 || json.Unmarshal(ch[0]["delta"], &d) != nil || len(d) != 1 || string(ch[0]["finish_reason"]) != "null" {
					t.Fatalf("token chunk %d: %s", i, payloads[i])
				}
				if i > 1 && !strings.HasPrefix(d["content"], " ") {
					t.Errorf("token %d %q has no leading space", i, d["content"])
				}
				text.WriteString(d["content"])
			}
			if text.String() != want {
				t.Errorf("streamed text %q, non-streamed %q", text.String(), want)
			}
			fin := chunks[tt.wantN+1].Choices
			if len(fin) != 1 || string(fin[0]["delta"]) != "{}" || string(fin[0]["finish_reason"]) != `"`+tt.wantFinish+`"` {
				t.Errorf("finish chunk %s, want empty delta and finish_reason %q", payloads[tt.wantN+1], tt.wantFinish)
			}
			if tt.includeUsage {
				u := chunks[len(chunks)-1]
				if u.Choices == nil || len(u.Choices) != 0 || !strings.Contains(payloads[len(chunks)-1], `"choices":[]`) {
					t.Errorf("usage chunk choices: %s", payloads[len(chunks)-1])
				}
				if u.Usage.PromptTokens != 6 || u.Usage.CompletionTokens != tt.wantN || u.Usage.TotalTokens != 6+tt.wantN {
					t.Errorf("usage %+v, want 6+%d", *u.Usage, tt.wantN)
				}
			}
		})
	}
	st := sim.Stats()
	if st.Completed != 2*int64(len(tests)) {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, st)
}

// TestStreamFlushesEachEvent reads the first token long before the
// reply could be finished, then hangs up mid-stream.
func TestStreamFlushesEachEvent(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 3, ITL: Duration(time.Minute)})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions",
		strings.NewReader(chatWith(t, map[string]any{"stream": true})))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var events []string
	for len(events) < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		if line != "\n" {
			events = append(events, line)
		}
	}
	if !strings.Contains(events[0], `"role":"assistant"`) || !strings.Contains(events[1], `"delta":{"content":"`) {
		t.Errorf("first events %q", events)
	}
	cancel()
	st := waitStats(t, sim, "the cancelled stream", func(s Stats) bool { return s.Cancelled == 1 && s.InFlight == 0 })
	if st.Completed != 0 {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, st)
}

func TestStreamDropAfter(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 8, DropAfter: 3})
	body := chatWith(t, map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("stream ended cleanly, want an abrupt close; body %q", b)
	}
	payloads, rest := parseSSE(t, string(b))
	if len(payloads) != 4 || rest != "" {
		t.Fatalf("got %d events (+%q), want role + 3 tokens: %q", len(payloads), rest, payloads)
	}
	if strings.Contains(string(b), "[DONE]") || strings.Contains(string(b), "finish_reason\":\"") {
		t.Errorf("dropped stream finished: %q", b)
	}
	st := waitStats(t, sim, "the drop", func(s Stats) bool { return s.InFlight == 0 })
	if st.Dropped != 1 || st.Completed != 0 {
		t.Errorf("stats %+v, want 1 dropped", st)
	}

	// A reply shorter than DropAfter is not dropped.
	complete(t, ts.URL, chatWith(t, map[string]any{"max_tokens": 2}))
	resp2, b2 := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", chatWith(t, map[string]any{"stream": true, "max_tokens": 2}))
	if resp2.StatusCode != 200 || !strings.HasSuffix(string(b2), "data: [DONE]\n\n") {
		t.Errorf("short stream: status %d body %q", resp2.StatusCode, b2)
	}
	st = sim.Stats()
	if st.Completed != 2 || st.Dropped != 1 {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, st)
}
