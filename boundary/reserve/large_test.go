package reserve

import (
	"runtime"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

// agentBody is an Anthropic Messages body as a coding agent sends it,
// of about size bytes: turns of text and tool results, and a base64
// image every tenth turn.
func agentBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":1000,"system":[{"type":"text","text":"You are an agent."}],"messages":[`)
	img := strings.Repeat("iVBORw0KGgo", 40_000) // 440 KB of base64
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case i%10 == 9:
			b.WriteString(`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}}]}`)
		case i%2 == 0:
			b.WriteString(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"` + strings.Repeat("line of code\\n", 200) + `"}]}`)
		default:
			b.WriteString(`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"path":"a.go"}}]}`)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// Of counts a large body in place, in one pass per level of nesting: what
// it allocates (the names of the members it reads) is a small fraction of
// the body, never a copy of it or of its messages, and its time grows
// with the body, not faster.
func TestOfLargeBody(t *testing.T) {
	for _, size := range []int{1 << 20, 16 << 20} {
		body := agentBody(size)
		var r wire.Request
		if err := wire.ReadRequest(body, &r); err != nil {
			t.Fatal(err)
		}
		w := &api.Wire{Format: api.FormatAnthropicMessages, Body: body, Object: r.Body, Members: r.Members}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c := Of(w)
		runtime.ReadMemStats(&after)
		if c.Bytes < len(body)*9/10 || c.Messages < 20 || c.Largest != "messages" {
			t.Fatalf("%d bytes counted as %+v", len(body), c)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(body)/16) {
			t.Errorf("counting %d bytes allocated %d", len(body), alloc)
		}
	}
}
