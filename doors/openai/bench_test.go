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
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
	"github.com/llmedge/llmedge/doors/native"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/routing"
)

// The chunk encoding runs once per token of every OpenAI stream. The
// benchmarks compare it with what encoding/json would cost for the same
// chunk; the gateway reuses one buffer per stream, as here.

func BenchmarkAppendDelta(b *testing.B) {
	f, a := testDoor(), answer()
	a.Deltas = 1
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = f.AppendDelta(buf[:0], a, &protocols.Delta{Text: " token", Token: true})
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
	f, a := testDoor(), answer()
	a.Deltas, a.IncludeUsage = 3, true
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = f.AppendEnd(buf[:0], a)
	}
}

func BenchmarkWriteAnswer(b *testing.B) {
	f, a := testDoor(), answer()
	a.Content = strings.Repeat("word ", 200)
	w := &protocoltest.Discard{H: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		f.WriteAnswer(w, a)
	}
}

func BenchmarkDecode(b *testing.B) {
	f := New(testDoor().limits, []string{"qwen", "gemma"})
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

// BenchmarkPipeline is one OpenAI request through the whole pipeline, as
// llm_gateway runs it (a signed token verified, the body decoded, the
// scope checked, a replica called through the openai backend over an
// in-memory transport, the answer written): the same path as the native
// door's BenchmarkPipeline (doors/native), through this door; and one
// whose user message is about 100 KB, carried through.
func BenchmarkPipeline(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	tok, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).Issue("demo", []string{"model:qwen"})
	if err != nil {
		b.Fatal(err)
	}
	verifier := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge", Cache: auth.NewTokenCache(1000)}
	for _, tc := range []struct {
		stream bool
		prompt string
	}{{false, "Say hello in a few words, please."}, {true, "Say hello in a few words, please."}, {false, prompt100KB()}} {
		stream := tc.stream
		name := "json"
		if stream {
			name = "stream"
		}
		if len(tc.prompt) > 1000 {
			name += "-100KB"
		}
		b.Run(name, func(b *testing.B) {
			p := pool.New(b.Name(), routing.P2C{})
			b.Cleanup(p.Close)
			r, _ := pool.NewReplica("http://replica:8000")
			p.Set([]*pool.Replica{r})
			pipeline := &gateway.Pipeline{Auth: &auth.BearerAuth{Verifier: verifier, Realm: "llmedge"}, Gateway: &gateway.Gateway{
				Models: map[string]*gateway.Model{"qwen": {Name: "qwen", Pool: p, Protocol: "openai",
					Protocols: map[string]protocols.Protocol{"openai": &openaicompat.Protocol{}}}},
				Client: &http.Client{Transport: protocoltest.NewReplay(16)}, PingInterval: -1,
			}}
			door := New(api.Limits{}, []string{"qwen"})
			body := []byte(`{"model":"qwen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + tc.prompt + `"}]` +
				map[bool]string{false: `}`, true: `,"stream":true,"stream_options":{"include_usage":true}}`}[stream])
			hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + tok}}
			u := httptest.NewRequest("POST", PathChatCompletions, nil).URL
			w := &protocoltest.Discard{H: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				r := (&http.Request{Method: "POST", Header: hdr, Body: io.NopCloser(bytes.NewReader(body)),
					ContentLength: int64(len(body)), URL: u}).WithContext(b.Context())
				clear(w.H)
				if ex := pipeline.Serve(w, r, door); ex.Status != 200 {
					b.Fatalf("status %d", ex.Status)
				}
			}
		})
	}
}

var _ gateway.Door = (*Door)(nil)

// BenchmarkDecodeNative is the native API's decoding of the same request,
// for comparison with BenchmarkDecode.
func BenchmarkDecodeNative(b *testing.B) {
	f := native.Door{Validator: &api.Validator{Models: []string{"qwen", "gemma"}, DefaultModel: "qwen"}}
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

// prompt100KB is a single user prompt of about 100 KB as JSON spells it,
// as long pasted documents are: words and punctuation, line breaks,
// quotes, backslashes and multi-byte characters (raw and escaped), the
// mix that makes `make bench`'s large-prompt row: the decoding cost that
// grows with the prompt.
func prompt100KB() string {
	words := []string{"the", "gateway", "carries", "a", "long", "document", "through", "to", "its", "replica,",
		"byte", "for", "byte;", `caf\u00e9`, "naïve", `\\path`, `\"quoted\"`, "42", "3.14", `end.\n`}
	var b strings.Builder
	for i := 0; b.Len() < 99_000; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(i*7+i/len(words))%len(words)])
	}
	return b.String()
}

// BenchmarkDecode100KB is the decoding of a request whose one user
// message is about 100 KB.
func BenchmarkDecode100KB(b *testing.B) {
	f := New(api.Limits{}, []string{"qwen", "gemma"})
	body := []byte(`{"model":"qwen","messages":[{"role":"user","content":"` + prompt100KB() + `"}],"stream":true}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if _, _, err := f.Decode(r); err != nil {
			b.Fatal(err)
		}
	}
}
