package openai

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends"
	backopenai "github.com/llmedge/llmedge/backends/openai"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/pool"
	"github.com/llmedge/llmedge/routing"
)

// The chunk encoding runs once per token of every OpenAI stream. The
// benchmarks compare it with what encoding/json would cost for the same
// chunk; the gateway reuses one buffer per stream, as here.

func BenchmarkAppendDelta(b *testing.B) {
	f, a := testFront(), answer()
	a.Deltas = 1
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = f.AppendDelta(buf[:0], a, " token")
	}
}

// wireChunk is the same chunk for encoding/json.
type wireChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []wireChoiceT `json:"choices"`
}

type wireChoiceT struct {
	Index        int               `json:"index"`
	Delta        map[string]string `json:"delta"`
	Logprobs     *int              `json:"logprobs"`
	FinishReason *string           `json:"finish_reason"`
}

func BenchmarkAppendDeltaEncodingJSON(b *testing.B) {
	a := answer()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		c := wireChunk{ID: "chatcmpl-" + a.ID, Object: "chat.completion.chunk", Created: a.Created.Unix(), Model: a.Model,
			Choices: []wireChoiceT{{Delta: map[string]string{"content": " token"}}}}
		j, _ := json.Marshal(&c)
		buf = append(append(append(buf[:0], "data: "...), j...), "\n\n"...)
	}
}

func BenchmarkAppendEnd(b *testing.B) {
	f, a := testFront(), answer()
	a.Deltas, a.IncludeUsage = 3, true
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = f.AppendEnd(buf[:0], a)
	}
}

func BenchmarkWriteAnswer(b *testing.B) {
	f, a := testFront(), answer()
	a.Content = strings.Repeat("word ", 200)
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		f.WriteAnswer(w, a)
	}
}

func BenchmarkDecode(b *testing.B) {
	f := New(testFront().limits, []string{"qwen", "gemma"})
	body := `{"model":"qwen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."},` +
		`{"role":"assistant","content":"Hello."},{"role":"user","content":"Again."}],"temperature":0.7,"max_tokens":256,"stream":true,` +
		`"stream_options":{"include_usage":true}}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, PathChatCompletions, strings.NewReader(body))
		if _, _, err := f.Decode(r); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// replay answers every replica call with a canned vLLM answer: one JSON
// object, or a stream of 16 tokens with the usage chunk.
type replay struct{ json, sse []byte }

func (t *replay) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	body, ct := t.json, "application/json"
	if r.Header.Get("Accept") == "text/event-stream" {
		body, ct = t.sse, "text/event-stream"
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

func newReplay() *replay {
	const chunk = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n"
	sse := strings.Repeat(chunk, 16) +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}` + "\n\n" +
		"data: [DONE]\n\n"
	js := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat(" word", 16) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	return &replay{json: []byte(js), sse: []byte(sse)}
}

// BenchmarkPipeline is one OpenAI request through the whole pipeline, as
// llm_gateway runs it (a signed token verified, the body decoded, the
// scope checked, a replica called through the openai backend over an
// in-memory transport, the answer written): the same path as the native
// API's gateway.BenchmarkPipeline, through this front.
func BenchmarkPipeline(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	tok, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).Issue("demo", []string{"model:qwen"})
	if err != nil {
		b.Fatal(err)
	}
	verifier := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge", Cache: auth.NewTokenCache(1000)}
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			p := pool.New(b.Name(), routing.P2C{})
			b.Cleanup(p.Close)
			r, _ := pool.NewReplica("http://replica:8000")
			p.Set([]*pool.Replica{r})
			pipeline := &gateway.Pipeline{Auth: &auth.BearerAuth{Verifier: verifier, Realm: "llmedge"}, Gateway: &gateway.Gateway{
				Models: map[string]*gateway.Model{"qwen": {Name: "qwen", Pool: p, Protocol: "openai",
					Backends: map[string]backends.Backend{"openai": &backopenai.Backend{}}}},
				Client: &http.Client{Transport: newReplay()}, PingInterval: -1,
			}}
			front := New(api.Limits{}, []string{"qwen"})
			body := []byte(`{"model":"qwen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in a few words, please."}]` +
				map[bool]string{false: `}`, true: `,"stream":true,"stream_options":{"include_usage":true}}`}[stream])
			hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + tok}}
			u := httptest.NewRequest("POST", PathChatCompletions, nil).URL
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				r := (&http.Request{Method: "POST", Header: hdr, Body: io.NopCloser(bytes.NewReader(body)),
					ContentLength: int64(len(body)), URL: u}).WithContext(b.Context())
				clear(w.h)
				if ex := pipeline.Serve(w, r, front); ex.Status != 200 {
					b.Fatalf("status %d", ex.Status)
				}
			}
		})
	}
}

var _ gateway.Front = (*Front)(nil)

// BenchmarkDecodeNative is the native API's decoding of the same request,
// for comparison with BenchmarkDecode.
func BenchmarkDecodeNative(b *testing.B) {
	f := gateway.NativeFront{Validator: &api.Validator{Models: []string{"qwen", "gemma"}, DefaultModel: "qwen"}}
	body := `{"model_type":"qwen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."},` +
		`{"role":"assistant","content":"Hello."},{"role":"user","content":"Again."}],"temperature":0.7,"stream":true}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/tasks/assistant_inference", strings.NewReader(body))
		if _, _, err := f.Decode(r); err != nil {
			b.Fatal(err)
		}
	}
}
