package openai

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// BenchmarkDecodeParts100KB is BenchmarkDecode100KB with the prompt as a
// content array (two text parts and an image), as multimodal and agent
// clients send it: what reading the parts costs beyond the string's.
func BenchmarkDecodeParts100KB(b *testing.B) {
	f := New(api.Limits{}, []string{"qwen", "gemma"})
	p := prompt100KB()
	body := []byte(`{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"` + p[:len(p)/2] + `"},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"text","text":"` + p[len(p)/2:] + `"}]}],"stream":true}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if _, _, err := f.Decode(r); err != nil {
			b.Fatal(err)
		}
	}
}
