package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/gateway"
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
