package simulator

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sdkCompletion is openai's Completion (and its stream chunks).
type sdkCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			TextOffset    []int                `json:"text_offset"`
			TokenLogprobs []float64            `json:"token_logprobs"`
			Tokens        []string             `json:"tokens"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *sdkUsage `json:"usage"`
}

func TestCompletions(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 6, Seed: 3})
	tests := []struct {
		name        string
		body        string
		wantChoices int
		wantTokens  int // per choice
		wantPrompt  int
		wantFinish  string
		echo        []string // prompt echoed per choice
	}{
		{"a string", `{"model":"sim-model","prompt":"once upon a time"}`, 1, 6, 4, "stop", nil},
		{"default max_tokens 16", `{"prompt":"x"}`, 1, 6, 1, "stop", nil},
		{"max_tokens caps", `{"prompt":"once upon a time","max_tokens":2}`, 1, 2, 4, "length", nil},
		{"null max_tokens is 16", `{"prompt":"a","max_tokens":null}`, 1, 6, 1, "stop", nil},
		{"a list", `{"prompt":["one two","three"],"max_tokens":3}`, 2, 3, 3, "length", nil},
		{"n per prompt", `{"prompt":["one two","three"],"n":2}`, 4, 6, 3, "stop", nil},
		{"token ids", `{"prompt":[1,2,3,4,5]}`, 1, 6, 5, "stop", nil},
		{"lists of token ids", `{"prompt":[[1,2],[3]]}`, 2, 6, 3, "stop", nil},
		{"echo", `{"prompt":["say this","and that"],"echo":true,"max_tokens":1}`, 2, 1, 4, "length", []string{"say this", "and that"}},
		{"sampling members", `{"prompt":"p","temperature":0.2,"top_p":0.9,"seed":3,"suffix":"s","user":"u","best_of":1,"logit_bias":{"1":2}}`, 1, 6, 1, "stop", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustPost(t, ts.URL, "/v1/completions", tt.body)
			requireKeys(t, b, "id", "object", "created", "model", "choices", "usage")
			c := decode[sdkCompletion](t, b)
			if !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" || c.Model != "sim-model" || len(c.Choices) != tt.wantChoices {
				t.Fatalf("answer %s", b)
			}
			if u := c.Usage; u.PromptTokens != tt.wantPrompt || u.CompletionTokens != tt.wantChoices*tt.wantTokens || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v", u)
			}
			for i, ch := range c.Choices {
				text := ch.Text
				if tt.echo != nil {
					var ok bool
					if text, ok = strings.CutPrefix(text, tt.echo[i]); !ok {
						t.Errorf("choice %d %q does not echo %q", i, ch.Text, tt.echo[i])
					}
				}
				if ch.Index != i || len(strings.Fields(text)) != tt.wantTokens || *ch.FinishReason != tt.wantFinish || ch.Logprobs != nil {
					t.Errorf("choice %d: %+v", i, ch)
				}
			}
			if !strings.Contains(string(b), `"logprobs":null,"finish_reason":"`+tt.wantFinish+`","stop_reason":null,"prompt_logprobs":null}`) {
				t.Errorf("choice not in vLLM's layout: %s", b)
			}

			// Streamed, the same texts.
			status, sb := post(t, ts.URL, "/v1/completions", strings.Replace(tt.body, "{", `{"stream":true,"stream_options":{"include_usage":true},`, 1))
			if status != 200 {
				t.Fatalf("stream: %d %s", status, sb)
			}
			payloads, rest := parseSSE(t, string(sb))
			if rest != "" || payloads[len(payloads)-1] != "[DONE]" {
				t.Fatalf("stream %q", sb)
			}
			texts := map[int]string{}
			finishes := map[int]int{}
			for j, p := range payloads[:len(payloads)-1] {
				ch := decode[sdkCompletion](t, []byte(p))
				if ch.Object != "text_completion" {
					t.Errorf("chunk %s", p)
				}
				if j == len(payloads)-2 {
					if len(ch.Choices) != 0 || ch.Usage == nil || *ch.Usage != *c.Usage {
						t.Errorf("usage chunk %s, want usage %+v", p, *c.Usage)
					}
					continue
				}
				if len(ch.Choices) != 1 || ch.Usage != nil {
					t.Fatalf("chunk %s", p)
				}
				texts[ch.Choices[0].Index] += ch.Choices[0].Text
				if ch.Choices[0].FinishReason != nil {
					finishes[ch.Choices[0].Index]++
				}
			}
			for i, ch := range c.Choices {
				if texts[i] != ch.Text || finishes[i] != 1 {
					t.Errorf("streamed choice %d %q (%d finishes), non-streamed %q", i, texts[i], finishes[i], ch.Text)
				}
			}
		})
	}
}

func TestCompletionsLogprobs(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 4, Seed: 3})
	for _, k := range []int{0, 2, 5} {
		b := mustPost(t, ts.URL, "/v1/completions", fmt.Sprintf(`{"prompt":"ab cd","logprobs":%d,"echo":true}`, k))
		c := decode[sdkCompletion](t, b)
		ch := c.Choices[0]
		lp := ch.Logprobs
		if lp == nil || len(lp.Tokens) != 4 || len(lp.TokenLogprobs) != 4 || len(lp.TextOffset) != 4 || len(lp.TopLogprobs) != 4 {
			t.Fatalf("logprobs %s", b)
		}
		for i, tok := range lp.Tokens {
			if ch.Text[lp.TextOffset[i]:lp.TextOffset[i]+len(tok)] != tok {
				t.Errorf("text_offset %d of %q in %q", lp.TextOffset[i], tok, ch.Text)
			}
			if len(lp.TopLogprobs[i]) != max(k, 1) || lp.TopLogprobs[i][tok] != lp.TokenLogprobs[i] {
				t.Errorf("k=%d top_logprobs %v for %q", k, lp.TopLogprobs[i], tok)
			}
		}
		// Streamed, per chunk, the same.
		_, sb := post(t, ts.URL, "/v1/completions", fmt.Sprintf(`{"prompt":"ab cd","logprobs":%d,"echo":true,"stream":true}`, k))
		payloads, _ := parseSSE(t, string(sb))
		var toks []string
		var offs []int
		for _, p := range payloads[:len(payloads)-1] {
			cl := decode[sdkCompletion](t, []byte(p)).Choices[0].Logprobs
			toks, offs = append(toks, cl.Tokens...), append(offs, cl.TextOffset...)
		}
		if fmt.Sprint(toks, offs) != fmt.Sprint(lp.Tokens, lp.TextOffset) {
			t.Errorf("streamed %v %v, non-streamed %v %v", toks, offs, lp.Tokens, lp.TextOffset)
		}
	}
}

func TestCompletionsErrors(t *testing.T) {
	ts, sim := start(t, Config{MaxModelLen: 20})
	tests := []struct{ name, body, want string }{
		{"no prompt", `{"model":"m"}`, "Either prompt or prompt_embeds must be provided and non-empty."},
		{"empty prompt", `{"prompt":""}`, "Either prompt or prompt_embeds must be provided and non-empty."},
		{"empty list", `{"prompt":[]}`, "Either prompt or prompt_embeds must be provided and non-empty."},
		{"prompt of wrong type", `{"prompt":{"a":1}}`, "prompt: Input should be"},
		{"negative token id", `{"prompt":[1,-2]}`, "prompt: Input should be"},
		{"logprobs above 20", `{"prompt":"a","logprobs":21}`, "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{"logprobs negative", `{"prompt":"a","logprobs":-4}`, "`logprobs` must be a positive value or -1."},
		{"logprobs a bool", `{"prompt":"a","logprobs":true}`, "`logprobs` must be an integer."},
		{"n 0", `{"prompt":"a","n":0}`, "n must be at least 1, got 0."},
		{"too many choices", `{"prompt":["a","b","c"],"n":50}`, "must be at most 128"},
		{"max_tokens 0", `{"prompt":"a","max_tokens":0}`, "max_tokens must be at least 1, got 0."},
		{"stream_options without stream", `{"prompt":"a","stream_options":{"include_usage":true}}`, "Stream options can only be defined when `stream=True`."},
		{"default max_tokens beyond the context", `{"prompt":"` + strings.Repeat("w ", 10) + `"}`,
			"'max_tokens' or 'max_completion_tokens' is too large: 16. This model's maximum context length is 20 tokens and your request has 10 input tokens (16 > 20 - 10)."},
		{"one prompt of a batch too long", `{"prompt":["a","` + strings.Repeat("w ", 25) + `"],"max_tokens":1}`, "However, your request has 25 input tokens."},
		{"malformed", `{"prompt":`, "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := post(t, ts.URL, "/v1/completions", tt.body)
			if status != 400 {
				t.Fatalf("status %d: %s", status, b)
			}
			if msg := errorShape(t, b, 400, "BadRequestError"); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q lacks %q", msg, tt.want)
			}
		})
	}
	if e := sim.Stats().Endpoints["/v1/completions"]; e.Rejected != int64(len(tests)) || e.Requests != e.Rejected {
		t.Errorf("endpoint stats %+v", e)
	}
}

// sdkEmbeddings is openai's CreateEmbeddingResponse, the embedding left
// raw: a list of floats or a base64 string.
type sdkEmbeddings struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// vector reads an embedding of either encoding.
func vector(t *testing.T, e any) []float64 {
	t.Helper()
	switch e := e.(type) {
	case []any:
		v := make([]float64, len(e))
		for i, x := range e {
			f, err := x.(json.Number).Float64() // decode reads numbers as json.Number
			if err != nil {
				t.Fatalf("component %v: %v", x, err)
			}
			v[i] = f
		}
		return v
	case string:
		b, err := base64.StdEncoding.DecodeString(e)
		if err != nil || len(b)%4 != 0 {
			t.Fatalf("base64 embedding %q: %v", e, err)
		}
		v := make([]float64, len(b)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return v
	}
	t.Fatalf("embedding %T", e)
	return nil
}

func norm(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func TestEmbeddings(t *testing.T) {
	ts, _ := start(t, Config{Seed: 1, EmbeddingDim: 32})
	embed := func(body string) ([]byte, sdkEmbeddings) {
		b := mustPost(t, ts.URL, "/v1/embeddings", body)
		requireKeys(t, b, "object", "data", "model", "usage.prompt_tokens", "usage.total_tokens")
		return b, decode[sdkEmbeddings](t, b)
	}
	tests := []struct {
		name       string
		body       string
		wantN      int
		wantDim    int
		wantTokens int
	}{
		{"a string", `{"model":"sim-model","input":"the quick fox"}`, 1, 32, 3},
		{"a list", `{"input":["a b","c","d e f"]}`, 3, 32, 6},
		{"token ids", `{"input":[5,6,7,8]}`, 1, 32, 4},
		{"lists of token ids", `{"input":[[5,6],[7]]}`, 2, 32, 3},
		{"dimensions", `{"input":"the quick fox","dimensions":8}`, 1, 8, 3},
		{"base64", `{"input":["the quick fox","x"],"encoding_format":"base64"}`, 2, 32, 4},
		{"float explicitly, user", `{"input":"x","encoding_format":"float","user":"u"}`, 1, 32, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, e := embed(tt.body)
			if e.Object != "list" || e.Model != "sim-model" || len(e.Data) != tt.wantN || e.Usage.PromptTokens != tt.wantTokens || e.Usage.TotalTokens != tt.wantTokens {
				t.Fatalf("answer %s", b)
			}
			if !strings.HasPrefix(string(b), `{"id":"embd-`) || !strings.Contains(string(b), `"completion_tokens":0,"prompt_tokens_details":null}`) {
				t.Errorf("not in vLLM's layout: %s", b)
			}
			for i, d := range e.Data {
				v := vector(t, d.Embedding)
				if d.Object != "embedding" || d.Index != i || len(v) != tt.wantDim || math.Abs(norm(v)-1) > 1e-5 {
					t.Errorf("item %d: %s len %d norm %v", i, d.Object, len(v), norm(v))
				}
			}
		})
	}
	// Deterministic; float and base64 agree; "dimensions" is the prefix
	// of the full vector, normalised again; inputs differ.
	_, full := embed(`{"input":["the quick fox","other"]}`)
	_, again := embed(`{"input":"the quick fox"}`)
	_, b64 := embed(`{"input":"the quick fox","encoding_format":"base64"}`)
	_, short := embed(`{"input":"the quick fox","dimensions":8}`)
	f, a, s := vector(t, full.Data[0].Embedding), vector(t, again.Data[0].Embedding), vector(t, short.Data[0].Embedding)
	if fmt.Sprint(f) != fmt.Sprint(a) || fmt.Sprint(f) != fmt.Sprint(vector(t, b64.Data[0].Embedding)) {
		t.Errorf("the same input gave different vectors")
	}
	n8 := norm(f[:8])
	for i := range s {
		if math.Abs(s[i]-f[i]/n8) > 1e-6 {
			t.Errorf("dimensions 8: component %d %v, want %v", i, s[i], f[i]/n8)
		}
	}
	if fmt.Sprint(f) == fmt.Sprint(vector(t, full.Data[1].Embedding)) {
		t.Errorf("different inputs, the same vector")
	}
}

func TestEmbeddingsErrorsAndFaults(t *testing.T) {
	ts, sim := start(t, Config{MaxModelLen: 5, APIKey: "k"})
	auth := []string{"Authorization", "Bearer k"}
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"no input", `{"model":"m"}`, 400, "input: Field required"},
		{"empty list", `{"input":[]}`, 400, "input: List should have at least 1 item"},
		{"input of wrong type", `{"input":{"a":1}}`, 400, "input: Input should be"},
		{"encoding_format unknown", `{"input":"a","encoding_format":"int8"}`, 400, "encoding_format"},
		{"dimensions 0", `{"input":"a","dimensions":0}`, 400, "dimensions must be at least 1"},
		{"dimensions too many", `{"input":"a","dimensions":17}`, 400, "dimensions must be at most 16"},
		{"beyond the context", `{"input":["a","a b c d e f"]}`, 400, "you requested 6 tokens in the input for embedding generation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := post(t, ts.URL, "/v1/embeddings", tt.body, auth...)
			if status != tt.status {
				t.Fatalf("status %d: %s", status, b)
			}
			if msg := errorShape(t, b, 400, "BadRequestError"); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q lacks %q", msg, tt.want)
			}
		})
	}
	if status, b := post(t, ts.URL, "/v1/embeddings", `{"input":"a"}`); status != 401 || string(b) != `{"error":"Unauthorized"}` {
		t.Errorf("without the key: %d %s", status, b)
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"error_rate":1,"error_status":503}`)
	if status, b := post(t, ts.URL, "/v1/embeddings", `{"input":"a"}`, auth...); status != 503 {
		t.Errorf("error_rate: %d %s", status, b)
	} else {
		errorShape(t, b, 503, "ServiceUnavailableError")
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"error_rate":0,"hang":true}`)
	ctxDone := make(chan struct{})
	go func() {
		defer close(ctxDone)
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/embeddings", strings.NewReader(`{"input":"a"}`))
		req.Header.Set("Authorization", "Bearer k")
		c := &http.Client{Timeout: 100 * time.Millisecond}
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("hung request answered %d", resp.StatusCode)
		}
	}()
	<-ctxDone
	st := waitStats(t, sim, "the hung request", func(s Stats) bool { return s.InFlight == 0 })
	e := st.Endpoints["/v1/embeddings"]
	if e.Rejected != int64(len(tests))+1 || e.Errors != 1 || e.Cancelled != 1 || e.Requests != e.Rejected+2 {
		t.Errorf("endpoint stats %+v", e)
	}
	checkAccounting(t, st)
}
