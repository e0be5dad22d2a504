package reserve

import (
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

// BenchmarkOf: the count of a usual chat body (a few messages, a tool)
// and of a 100 KB one, as admission makes it for every limited request.
func BenchmarkOf(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"chat", `{"model":"qwen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"hello there"},` +
			`{"role":"assistant","content":"hi"},{"role":"user","content":"what is the weather"}],"max_tokens":200,"n":2,` +
			`"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`},
		{"chat 100KB", `{"model":"qwen","messages":[{"role":"user","content":"` + strings.Repeat("word ", 20<<10) + `"}],"max_tokens":200}`},
	} {
		// As the chat door hands it over: the messages' spans read.
		var c wire.Chat
		if err := wire.ReadChat([]byte(bc.body), &c); err != nil {
			b.Fatal(err)
		}
		w := &api.Wire{Format: api.FormatOpenAIChat, Body: []byte(bc.body), Object: c.Body, Members: c.Members}
		for _, m := range c.Items {
			w.Messages = append(w.Messages, m.Value)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				_ = Of(w)
			}
		})
	}
}
