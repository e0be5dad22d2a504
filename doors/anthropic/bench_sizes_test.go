package anthropic

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// agentContext is a Messages body of about size bytes, as an agent sends
// its context: a system prompt of two text blocks, then ten turns, the
// user's a string and the assistant's a list of a text block and a tool
// call, plain text with a line break every 80 characters and now and then
// a unicode escape.
func agentContext(size int) []byte {
	line := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2)[:72] + `\u00e9t\u00e9\n`
	per := max(size/11, 2*len(line))
	text := strings.Repeat(line, per/len(line))
	var b strings.Builder
	b.WriteString(`{"model":"qwen","max_tokens":256,"temperature":0.7,"system":[{"type":"text","text":"`)
	b.WriteString(text[:len(text)/2])
	b.WriteString(`"},{"type":"text","text":"Answer briefly.","cache_control":{"type":"ephemeral"}}],"messages":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"role":"user","content":"%s"}`, text)
			continue
		}
		fmt.Fprintf(&b, `{"role":"assistant","content":[{"type":"text","text":"%s"},`+
			`{"type":"tool_use","id":"toolu_%d","name":"read_file","input":{"path":"a.go"}}]}`, text, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

var benchSizes = []struct {
	name string
	size int
}{{"1KB", 1 << 10}, {"16KB", 16 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}}

// BenchmarkDecodeSizes is the door's reading of a conversation carried
// through (the passthrough mode) at each of benchSizes: what the door
// costs per byte of prompt, routing's and the limits' view included. The
// body's pooled buffer is given back after each request, as the pipeline
// does when the exchange ends.
func BenchmarkDecodeSizes(b *testing.B) {
	d := New(api.Limits{}, []string{"qwen"}, map[string]Mode{"qwen": ModePassthrough})
	for _, bs := range benchSizes {
		body := agentContext(bs.size)
		b.Run(bs.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				decodeOnce(b, d, body)
			}
		})
	}
}

func decodeOnce(tb testing.TB, d *Door, body []byte) api.Chat {
	r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
	chat, _, aerr := d.Decode(r)
	if aerr != nil {
		tb.Fatal(aerr)
	}
	chat.Wire.Lease.Release()
	return chat
}
