package simulator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// capturedRequests is GET /sim/requests decoded.
func capturedRequests(t *testing.T, url, query string) []CapturedRequest {
	t.Helper()
	resp, b := do(t, http.MethodGet, url+"/sim/requests"+query, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /sim/requests: %d %s", resp.StatusCode, b)
	}
	return decode[capturedList](t, b).Requests
}

func TestCaptureRequests(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 2, APIKey: "secret"})
	// Bodies as a client wrote them: odd spacing, key order, escapes,
	// invalid UTF-8 and a vendor member must come back byte for byte.
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", "{ \"messages\" : [ {\"content\":\"h\\u00e9llo\\n\",\"role\":\"user\"} ],\n\"x_vendor\":{\"z\":1,\"a\":[2.50,1e3]} }"},
		{"/v1/completions", `{"prompt":"caf` + "\xff\xfe" + `","max_tokens":1}`},
		{"/v1/embeddings", `{"input":"x"}`},
		{"/v1/messages", `{"model":"c","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"c","input":"hi"}`},
	}
	for _, b := range bodies {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+b.path+"?api-version=1", strings.NewReader(b.body))
		req.Header.Set("Authorization", "Bearer secret")
		req.Header.Set("X-Api-Key", "secret")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add("X-Trace", "one")
		req.Header.Add("X-Trace", "two")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do(t, http.MethodGet, ts.URL+"/health", "")
	do(t, http.MethodGet, ts.URL+"/v1/models", "", "Authorization", "Bearer secret")

	got := capturedRequests(t, ts.URL, "")
	if len(got) != len(bodies)+1 {
		t.Fatalf("%d captured, want %d (the API paths only): %+v", len(got), len(bodies)+1, got)
	}
	for i, b := range bodies {
		c := got[i]
		if c.Seq != uint64(i+1) || c.Method != "POST" || c.Path != b.path || c.Query != "api-version=1" ||
			!bytes.Equal(c.Body, []byte(b.body)) || c.Size != len(b.body) || c.Truncated || time.Since(c.Time) > time.Minute {
			t.Errorf("captured %d: %+v %q, want %s %q", i, c, c.Body, b.path, b.body)
		}
		if c.Header.Get("Authorization") != "" || c.Header.Get("X-Api-Key") != "" {
			t.Errorf("credentials captured: %v", c.Header)
		}
		if c.Header.Get("Content-Type") != "application/json" || fmt.Sprint(c.Header.Values("X-Trace")) != "[one two]" {
			t.Errorf("headers %v", c.Header)
		}
	}
	if last := got[len(got)-1]; last.Method != "GET" || last.Path != "/v1/models" || len(last.Body) != 0 {
		t.Errorf("GET captured as %+v", last)
	}
	// The requests were answered as usual (the capture gave the
	// handlers the same bytes).
	if st := sim.Stats(); st.Completed != int64(len(bodies)) {
		t.Errorf("stats %+v", st)
	}
	if only := capturedRequests(t, ts.URL, "?path=/v1/messages"); len(only) != 1 || only[0].Path != "/v1/messages" {
		t.Errorf("path filter: %+v", only)
	}
	if got := sim.CapturedRequests(); len(got) != len(bodies)+1 {
		t.Errorf("CapturedRequests: %d", len(got))
	}
	do(t, http.MethodPost, ts.URL+"/sim/reset", "")
	if got := capturedRequests(t, ts.URL, ""); len(got) != 0 {
		t.Errorf("after reset: %+v", got)
	}
}

func TestCaptureBounds(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 1})
	for i := range CaptureRequests + 5 {
		post(t, ts.URL, "/v1/completions", fmt.Sprintf(`{"prompt":"p%d"}`, i))
	}
	got := capturedRequests(t, ts.URL, "")
	if len(got) != CaptureRequests || got[0].Seq != 6 || string(got[0].Body) != `{"prompt":"p5"}` || got[len(got)-1].Seq != CaptureRequests+5 {
		t.Fatalf("kept %d, first %+v", len(got), got[0])
	}
	// A body over CaptureBodyBytes is kept cut, and still answered.
	big := `{"prompt":"` + strings.Repeat("w ", CaptureBodyBytes/2) + `","max_tokens":1}`
	if status, b := post(t, ts.URL, "/v1/completions", big); status != 200 {
		t.Fatalf("big body: %d %.200s", status, b)
	}
	last := capturedRequests(t, ts.URL, "?path=/v1/completions")
	c := last[len(last)-1]
	if !c.Truncated || c.Size != len(big) || len(c.Body) != CaptureBodyBytes || !bytes.Equal(c.Body, []byte(big[:CaptureBodyBytes])) {
		t.Errorf("big body captured: truncated %v size %d kept %d", c.Truncated, c.Size, len(c.Body))
	}
	// A body beyond the handlers' limit is still refused by them.
	huge := strings.NewReader(`{"prompt":"` + strings.Repeat("w", maxBodyBytes) + `"}`)
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", huge)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "too large") {
		t.Errorf("huge body: %d %.200s", resp.StatusCode, b)
	}
}

// TestNewEndpointsFaults: the latency model and the faults apply to the
// generating endpoints as to chat.
func TestNewEndpointsFaults(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 6})
	requests := []struct{ path, body, streamed string }{
		{"/v1/completions", `{"prompt":"hi there"}`, `{"prompt":"hi there","stream":true}`},
		{"/v1/messages", `{"model":"c","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"c","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"input":"hi"}`, `{"input":"hi","stream":true}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":2}`, `{"messages":[{"role":"user","content":"hi"}],"n":2,"stream":true}`},
	}
	for _, r := range requests {
		t.Run(r.path, func(t *testing.T) {
			sim.Reset()
			set := func(patch string) {
				if resp, b := do(t, http.MethodPost, ts.URL+"/sim/config", patch); resp.StatusCode != 200 {
					t.Fatalf("%s: %s", patch, b)
				}
			}
			// drop_after: the stream stops after 3 tokens, abruptly; not
			// streamed, the connection closes without an answer.
			set(`{"drop_after":3,"error_after":0,"hang":false,"ttft":"0s"}`)
			resp, err := http.Post(ts.URL+r.path, "application/json", strings.NewReader(r.streamed))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil || strings.Contains(string(b), "[DONE]") || strings.Contains(string(b), "message_stop") || strings.Contains(string(b), "response.completed") {
				t.Errorf("drop_after: stream ended cleanly (%v): %s", err, b)
			}
			if _, err := http.Post(ts.URL+r.path, "application/json", strings.NewReader(r.body)); err == nil {
				t.Errorf("drop_after: non-streamed request answered")
			}
			// error_after: streamed, in-band after 2 tokens; not, a 500.
			set(`{"drop_after":0,"error_after":2}`)
			status, b := post(t, ts.URL, r.path, r.streamed)
			if status != 200 || !strings.Contains(string(b), "error_after") {
				t.Errorf("error_after streamed: %d %s", status, b)
			}
			if status, b := post(t, ts.URL, r.path, r.body); status != 500 || !strings.Contains(string(b), "error_after") {
				t.Errorf("error_after: %d %s", status, b)
			}
			// hang: nothing until the client leaves.
			set(`{"error_after":0,"hang":true}`)
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+r.path, strings.NewReader(r.body))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("hang: answered %d", resp.StatusCode)
			}
			cancel()
			// ttft: the answer waits for it.
			set(`{"hang":false,"ttft":"40ms"}`)
			t0 := time.Now()
			if status, b := post(t, ts.URL, r.path, r.body); status != 200 || time.Since(t0) < 40*time.Millisecond {
				t.Errorf("ttft: %d after %v: %s", status, time.Since(t0), b)
			}
			st := waitStats(t, sim, "the hung request", func(s Stats) bool { return s.InFlight == 0 })
			e := st.Endpoints[r.path]
			if e.Dropped != 2 || e.Errors != 2 || e.Cancelled != 1 || e.Completed != 1 || e.Requests != 6 {
				t.Errorf("endpoint stats %+v", e)
			}
			checkAccounting(t, st)
			set(`{"ttft":"0s"}`)
		})
	}
}

func TestNewEndpointsEngine(t *testing.T) {
	// The prefix cache and the context length apply to completions and
	// messages as to chat; loading and max_concurrent too.
	ts, sim := start(t, Config{Tokens: 2, BlockSize: 4})
	prompt := strings.Repeat("word ", 20)
	for range 2 {
		mustPost(t, ts.URL, "/v1/completions", `{"prompt":"`+prompt+`"}`)
	}
	if st := sim.Stats(); st.PrefixCacheQueries != 40 || st.PrefixCacheHits != 16 {
		t.Errorf("completions: prefix cache %d/%d, want 16 of 40 tokens hit", st.PrefixCacheHits, st.PrefixCacheQueries)
	}
	body := `{"model":"c","max_tokens":2,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	for range 2 {
		mustPost(t, ts.URL, "/v1/messages", body)
	}
	if st := sim.Stats(); st.PrefixCacheHits != 16+20 {
		t.Errorf("messages: %d prefix cache hits, want 36", st.PrefixCacheHits)
	}

	do(t, http.MethodPost, ts.URL+"/sim/config", `{"loading":"1h"}`)
	for _, p := range []string{"/v1/completions", "/v1/embeddings", "/v1/messages", "/v1/responses"} {
		if status, b := post(t, ts.URL, p, `{}`); status != 503 {
			t.Errorf("loading: POST %s %d %s", p, status, b)
		}
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"loading":"0s","dialect":"tgi"}`)
	// TGI's framing and error shape carry over to completions.
	status, b := post(t, ts.URL, "/v1/completions", `{"prompt":"a","stream":true}`)
	if status != 200 || !strings.HasPrefix(string(b), `data:{"id":"","object":"text_completion"`) || !strings.HasSuffix(string(b), "data:[DONE]\n\n") {
		t.Errorf("tgi completions stream %d %s", status, b)
	}
	if status, b := post(t, ts.URL, "/v1/completions", `{}`); status != 400 || !strings.Contains(string(b), `"error_type":"validation"`) {
		t.Errorf("tgi completions error %d %s", status, b)
	}
	checkAccounting(t, sim.Stats())
}

func TestConfigNewFields(t *testing.T) {
	ts, _ := start(t, Config{})
	for _, tt := range []struct {
		patch string
		ok    bool
	}{
		{`{"embedding_dim":384}`, true},
		{`{"embedding_dim":0}`, true},
		{`{"embedding_dim":-1}`, false},
		{`{"embedding_dim":70000}`, false},
		{`{"no_messages":true,"no_responses":true}`, true},
	} {
		resp, b := do(t, http.MethodPost, ts.URL+"/sim/config", tt.patch)
		if (resp.StatusCode == 200) != tt.ok {
			t.Errorf("%s: %d %s", tt.patch, resp.StatusCode, b)
		}
	}
	if err := (Config{EmbeddingDim: -3}).Validate(); err == nil || !strings.Contains(err.Error(), "embedding_dim") {
		t.Errorf("Validate: %v", err)
	}
	if c := New(Config{EmbeddingDim: 1 << 20}).Config(); c.EmbeddingDim != 0 {
		t.Errorf("clamped embedding_dim %d", c.EmbeddingDim)
	}
}
