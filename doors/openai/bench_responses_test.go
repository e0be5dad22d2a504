package openai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// responsesConversation is a Responses body of about size bytes, as an
// agent sends its context: instructions, then ten items, the user's
// messages as a string content and the assistant's as a list of
// output_text parts, each followed by a function call and its output,
// plain text with a line break every 80 characters and now and then a
// unicode escape.
func responsesConversation(size int) []byte {
	line := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2)[:72] + `\u00e9t\u00e9\n`
	per := max(size/11, 2*len(line))
	text := strings.Repeat(line, per/len(line))
	var b strings.Builder
	b.WriteString(`{"model":"qwen","max_output_tokens":256,"temperature":0.7,"store":false,"instructions":"`)
	b.WriteString(text[:len(text)/2])
	b.WriteString(`","input":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"role":"user","content":"%s"}`, text)
			continue
		}
		fmt.Fprintf(&b, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"%s"}]},`+
			`{"type":"function_call","call_id":"call_%d","name":"read_file","arguments":"{\"path\":\"a.go\"}"},`+
			`{"type":"function_call_output","call_id":"call_%d","output":"package a"}`, text, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

var responsesBenchSizes = []struct {
	name string
	size int
}{{"1KB", 1 << 10}, {"16KB", 16 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}}

// BenchmarkResponsesDecodeSizes is the Responses door's reading of a
// conversation carried through (the passthrough mode) at each of
// responsesBenchSizes: what the door costs per byte of prompt, routing's
// and the limits' view included. The body's pooled buffer is given back
// after each request, as the pipeline does when the exchange ends.
func BenchmarkResponsesDecodeSizes(b *testing.B) {
	rs := Responses{New(api.Limits{}, []string{"qwen"}).WithResponsesModes(map[string]ResponsesMode{"qwen": ResponsesPassthrough})}
	for _, bs := range responsesBenchSizes {
		body := responsesConversation(bs.size)
		b.Run(bs.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				decodeResponsesOnce(b, rs, body)
			}
		})
	}
}

func decodeResponsesOnce(tb testing.TB, rs Responses, body []byte) api.Chat {
	r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
	chat, _, aerr := rs.Decode(r)
	if aerr != nil {
		tb.Fatal(aerr)
	}
	chat.Wire.Lease.Release()
	return chat
}
