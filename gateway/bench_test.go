package gateway

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends"
	"github.com/llmedge/llmedge/backends/openai"
	"github.com/llmedge/llmedge/pool"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/routing/prefix"
	"github.com/llmedge/llmedge/status"
)

// The hot path, stage by stage, for the benchmark's request: a bearer
// token, a short chat, a 16-token answer. Each stage is measured alone
// (ns/op, allocs/op) and then the whole pipeline, with the replica an
// in-memory transport so that only the gateway's own work is counted.

const benchBody = `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in a few words, please."}],"model_type":"qwen"}`

// replayTransport answers every request with a canned vLLM answer: a
// chat.completion for a one-JSON call, an SSE stream for a streamed one.
type replayTransport struct{ json, sse []byte }

func (t *replayTransport) RoundTrip(r *http.Request) (*http.Response, error) {
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

func newReplay(tokens int) *replayTransport {
	var sse strings.Builder
	sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	words := make([]string, tokens)
	for i := range tokens {
		words[i] = " word"
		sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n")
	}
	sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}` + "\n\n")
	sse.WriteString("data: [DONE]\n\n")
	js := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Join(words, "") + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	return &replayTransport{json: []byte(js), sse: []byte(sse.String())}
}

type benchEnv struct {
	pipeline *Pipeline
	front    NativeFront
	token    string
}

func newBenchEnv(b *testing.B, policy pool.Policy, streamUpstream bool) *benchEnv {
	b.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	tok, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).Issue("demo", []string{"model:qwen"})
	if err != nil {
		b.Fatal(err)
	}
	p := pool.New(b.Name(), policy)
	b.Cleanup(p.Close)
	r, _ := pool.NewReplica("http://replica:8000")
	p.Set([]*pool.Replica{r})
	front := NativeFront{Validator: &api.Validator{Models: []string{"qwen"}, DefaultModel: "qwen"}}
	g := &Gateway{
		Models: map[string]*Model{"qwen": {Name: "qwen", Pool: p, Protocol: "openai", StreamUpstream: streamUpstream,
			Backends: map[string]backends.Backend{"openai": &openai.Backend{}}}},
		Client:       &http.Client{Transport: newReplay(16)},
		PingInterval: -1,
	}
	verifier := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge", Cache: auth.NewTokenCache(1000)}
	return &benchEnv{pipeline: &Pipeline{Auth: &auth.BearerAuth{Verifier: verifier, Realm: "llmedge"}, Gateway: g},
		front: front, token: tok}
}

func (e *benchEnv) request(stream bool) *http.Request {
	body := benchBody
	if stream {
		body = strings.Replace(body, `"model_type"`, `"stream":true,"model_type"`, 1)
	}
	r := httptest.NewRequest("POST", PathInference, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+e.token)
	return r
}

// discard is a ResponseWriter that keeps nothing, as cheap as a test can make one.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

func BenchmarkStageAuth(b *testing.B) {
	e := newBenchEnv(b, routing.P2C{}, false)
	r := e.request(false)
	if _, err := e.pipeline.Auth.Authenticate(r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.pipeline.Auth.Authenticate(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStageDecode(b *testing.B) {
	e := newBenchEnv(b, routing.P2C{}, false)
	body := []byte(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if _, _, err := e.front.Decode(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStageSelect(b *testing.B) {
	idx, _ := prefix.New("qwen", prefix.Config{})
	for _, tc := range []struct {
		name   string
		policy pool.Policy
	}{{"p2c", routing.P2C{}}, {"prefix_cache", &routing.PrefixCache{Index: idx}}} {
		b.Run(tc.name, func(b *testing.B) {
			p := pool.New(b.Name(), tc.policy)
			defer p.Close()
			var rs []*pool.Replica
			for _, u := range []string{"http://a:1", "http://b:1", "http://c:1", "http://d:1"} {
				r, _ := pool.NewReplica(u)
				rs = append(rs, r)
			}
			p.Set(rs)
			req := &pool.Request{Model: "qwen", Messages: []api.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Say hello in a few words, please."}}}
			b.ReportAllocs()
			for b.Loop() {
				l, err := p.Acquire(req, nil)
				if err != nil {
					b.Fatal(err)
				}
				l.Release(pool.Success)
			}
		})
	}
}

// BenchmarkStageRelay is one replica call: the request's encoding, the
// transport, and the answer's decoding (a one-JSON call, and a stream of
// 16 tokens relayed delta by delta).
func BenchmarkStageRelay(b *testing.B) {
	client := &http.Client{Transport: newReplay(16)}
	req := &backends.Request{BaseURL: "http://replica:8000", Messages: []api.Message{{Role: "user", Content: "Say hello."}}}
	for _, stream := range []bool{false, true} {
		name := "json"
		var onDelta backends.DeltaFunc
		if stream {
			name, onDelta = "stream", func(string) error { return nil }
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := (&openai.Backend{}).Chat(b.Context(), client, req, onDelta); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStageAnswer(b *testing.B) {
	f := NativeFront{}
	a := &Answer{ID: "abc", Model: "qwen", Content: strings.Repeat(" word", 16), FinishReason: "stop",
		Usage: api.Usage{PromptTokens: 12, CompletionTokens: 16, TotalTokens: 28}, UsageKnown: true, MessageCount: 2}
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		f.WriteAnswer(w, a)
	}
}

// BenchmarkPipeline is the whole path of one request, as llm_gateway runs
// it: non-streamed (one-JSON replica call) and streamed.
func BenchmarkPipeline(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			e := newBenchEnv(b, routing.P2C{}, false)
			body := []byte(benchBody)
			if stream {
				body = []byte(strings.Replace(benchBody, `"model_type"`, `"stream":true,"model_type"`, 1))
			}
			hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + e.token}}
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				r := (&http.Request{Method: "POST", Header: hdr, Body: io.NopCloser(bytes.NewReader(body)),
					ContentLength: int64(len(body)), URL: benchURL}).WithContext(b.Context())
				clear(w.h)
				ex := e.pipeline.Serve(w, r, e.front)
				if ex.Status != 200 {
					b.Fatalf("status %d", ex.Status)
				}
			}
		})
	}
}

var benchURL = httptest.NewRequest("POST", PathInference, nil).URL

// BenchmarkPipelineObserved is BenchmarkPipeline as a configured gateway
// runs it: the status page's recorder hears every request, and the
// request is traced or not (a recording server span with the SDK's
// in-memory recorder standing in for the exporter). Untraced, it must
// cost what BenchmarkPipeline does plus one Record.
func BenchmarkPipelineObserved(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "untraced"
		if traced {
			name = "traced"
		}
		b.Run(name, func(b *testing.B) {
			e := newBenchEnv(b, routing.P2C{}, false)
			e.pipeline.Gateway.Status = status.NewRecorder()
			ctx := b.Context()
			if traced {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
				ctx, _ = tp.Tracer("caddy").Start(ctx, "handler")
			}
			body := []byte(benchBody)
			hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + e.token}}
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				r := (&http.Request{Method: "POST", Header: hdr, Body: io.NopCloser(bytes.NewReader(body)),
					ContentLength: int64(len(body)), URL: benchURL}).WithContext(ctx)
				clear(w.h)
				ex := e.pipeline.Serve(w, r, e.front)
				if ex.Status != 200 {
					b.Fatalf("status %d", ex.Status)
				}
			}
		})
	}
}
