package native

import (
	"bytes"
	"context"
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
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/status"
)

// The native door's part of the hot path (decoding, the answer) and the
// whole pipeline through it, for the benchmark's request: a bearer
// token, a short chat, a 16-token answer, with the replica an in-memory
// transport so that only the gateway's own work is counted.

const benchBody = `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in a few words, please."}],"model_type":"qwen"}`

var benchURL = httptest.NewRequest("POST", Path, nil).URL

func benchDoor() Door {
	return Door{Validator: &api.Validator{Models: []string{"qwen"}, DefaultModel: "qwen"}}
}

// benchPipeline is a pipeline over one in-memory replica of "qwen", and
// a token that may use it.
func benchPipeline(b *testing.B) (*gateway.Pipeline, string) {
	b.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	tok, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).Issue("demo", []string{"model:qwen"})
	if err != nil {
		b.Fatal(err)
	}
	p := pool.New(b.Name(), routing.P2C{})
	b.Cleanup(p.Close)
	r, _ := pool.NewReplica("http://replica:8000")
	p.Set([]*pool.Replica{r})
	g := &gateway.Gateway{
		Models: map[string]*gateway.Model{"qwen": {Name: "qwen", Pool: p, Protocol: "openai",
			Protocols: map[string]protocols.Protocol{"openai": &openaicompat.Protocol{}}}},
		Client:       &http.Client{Transport: protocoltest.NewReplay(16)},
		PingInterval: -1,
	}
	verifier := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge", Cache: auth.NewTokenCache(1000)}
	return &gateway.Pipeline{Auth: &auth.BearerAuth{Verifier: verifier, Realm: "llmedge"}, Gateway: g}, tok
}

func BenchmarkDecode(b *testing.B) {
	d := benchDoor()
	body := []byte(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if _, _, err := d.Decode(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnswer(b *testing.B) {
	a := &gateway.Answer{ID: "abc", Model: "qwen", Content: strings.Repeat(" word", 16), FinishReason: "stop",
		Usage: api.Usage{PromptTokens: 12, CompletionTokens: 16, TotalTokens: 28}, UsageKnown: true, MessageCount: 2}
	w := &protocoltest.Discard{H: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		Door{}.WriteAnswer(w, a)
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
			pipeline, tok := benchPipeline(b)
			runPipeline(b, pipeline, tok, stream, b.Context())
		})
	}
}

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
			pipeline, tok := benchPipeline(b)
			pipeline.Gateway.Status = status.NewRecorder()
			ctx := b.Context()
			if traced {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
				ctx, _ = tp.Tracer("caddy").Start(ctx, "handler")
			}
			runPipeline(b, pipeline, tok, false, ctx)
		})
	}
}

func runPipeline(b *testing.B, pipeline *gateway.Pipeline, tok string, stream bool, ctx context.Context) {
	body := []byte(benchBody)
	if stream {
		body = []byte(strings.Replace(benchBody, `"model_type"`, `"stream":true,"model_type"`, 1))
	}
	runPipelineBody(b, pipeline, tok, body, ctx)
}

// runPipelineBody serves body through pipeline and the bench door, b.N
// times.
func runPipelineBody(b *testing.B, pipeline *gateway.Pipeline, tok string, body []byte, ctx context.Context) {
	d := benchDoor()
	hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + tok}}
	w := &protocoltest.Discard{H: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		r := (&http.Request{Method: "POST", Header: hdr, Body: io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)), URL: benchURL}).WithContext(ctx)
		clear(w.H)
		if ex := pipeline.Serve(w, r, d); ex.Status != 200 {
			b.Fatalf("status %d", ex.Status)
		}
	}
}

// prompt100KB is a single user prompt of about 100 KB (99,000
// characters), plain text with a line break every 80 characters, as long
// pasted documents are: the decoding cost that grows with the prompt.
func prompt100KB() string {
	line := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2)[:79]
	return strings.Repeat(line+`\n`, 99_000/80)
}

// BenchmarkDecode100KB is BenchmarkDecode with one user message of about
// 100 KB.
func BenchmarkDecode100KB(b *testing.B) {
	d := benchDoor()
	body := []byte(`{"messages":[{"role":"user","content":"` + prompt100KB() + `"}],"model_type":"qwen"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if _, _, err := d.Decode(r); err != nil {
			b.Fatal(err)
		}
	}
}
