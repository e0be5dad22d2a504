package native

import (
	"fmt"
	"strings"
	"testing"
)

// conversation is a native body of ten messages (system, then user and
// assistant turns) of about size bytes in all, plain text with a line
// break every 80 characters and now and then a unicode escape, as an
// agent's context is: what the door's cost per byte is measured on.
func conversation(size int) []byte {
	line := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2)[:72] + `\u00e9t\u00e9\n`
	per := max(size/10, 2*len(line))
	var b strings.Builder
	b.WriteString(`{"model_type":"qwen","temperature":0.7,"messages":[`)
	for i := range 10 {
		role := "user"
		switch {
		case i == 0:
			role = "system"
		case i%2 == 0:
			role = "assistant"
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":%q,"content":"`, role)
		b.WriteString(strings.Repeat(line, per/len(line)))
		b.WriteString(`"}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// benchSizes are the conversation sizes of BenchmarkPipelineSizes.
var benchSizes = []struct {
	name string
	size int
}{{"1KB", 1 << 10}, {"16KB", 16 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}}

// BenchmarkPipelineSizes is BenchmarkPipeline (non-streamed) for a
// conversation of ten messages at each of benchSizes: the cost of the
// native door that grows with the prompt, decoding and the replica's
// body included.
func BenchmarkPipelineSizes(b *testing.B) {
	for _, bs := range benchSizes {
		body := conversation(bs.size)
		b.Run(bs.name, func(b *testing.B) {
			pipeline, tok := benchPipeline(b)
			b.SetBytes(int64(len(body)))
			runPipelineBody(b, pipeline, tok, body, b.Context())
		})
	}
}
