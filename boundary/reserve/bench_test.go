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

// BenchmarkConversation: an agent's 100 KB Anthropic conversation (tool
// results that quote code with escapes and mention images, as file reads
// do) counted from the body, which reads the messages again to find
// media parts, and from the door's reading (Read, then Of), which does
// not.
func BenchmarkConversation(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"model":"m","max_tokens":1024,"messages":[`)
	chunk := strings.Repeat(`func draw(img image.Image) { fmt.Println(\"caf\u00e9 \u2192 ok\") }\n`, 60)
	for i := range 24 {
		if i > 0 {
			sb.WriteByte(',')
		}
		if i%2 == 0 {
			sb.WriteString(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t` + string(rune('a'+i)) +
				`","content":[{"type":"text","text":"` + chunk + `"}]},{"type":"text","text":"go on"}]}`)
		} else {
			sb.WriteString(`{"role":"assistant","content":[{"type":"text","text":"reading"},{"type":"tool_use","id":"t` +
				string(rune('a'+i)) + `","name":"read","input":{"path":"a.go"}}]}`)
		}
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	var c wire.Chat
	if err := wire.ReadChat(body, &c); err != nil {
		b.Fatal(err)
	}
	b.Run("from the body", func(b *testing.B) {
		w := &api.Wire{Format: api.FormatAnthropicMessages, Body: body, Object: c.Body, Members: c.Members}
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_ = Of(w)
		}
	})
	b.Run("as the door read it", func(b *testing.B) {
		w := &api.Wire{Format: api.FormatAnthropicMessages, Body: body, Object: c.Body, Members: c.Members, ConvRead: true}
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			w.ConvItems, w.ConvMedia = Read(&c)
			_ = Of(w)
		}
	})
}
