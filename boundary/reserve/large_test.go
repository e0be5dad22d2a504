package reserve

import (
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

// Of counts a large body in place: its allocations do not grow with the
// body (no copy of it, nor of its messages), its media are counted.
func TestOfLargeBody(t *testing.T) {
	var allocs [2]float64
	for i, size := range []int{1 << 20, 16 << 20} {
		body := agentBody(size)
		var r wire.Request
		if err := wire.ReadRequest(body, &r); err != nil {
			t.Fatal(err)
		}
		w := &api.Wire{Format: api.FormatAnthropicMessages, Body: body, Object: r.Body, Members: r.Members}
		c := Of(w)
		if c.Bytes < len(body)*9/10 || c.Messages < 20 || c.Largest != "messages" {
			t.Fatalf("%d bytes counted as %+v", len(body), c)
		}
		allocs[i] = testing.AllocsPerRun(3, func() { _ = Of(w) })
	}
	if allocs[1] > allocs[0]+2 {
		t.Errorf("counting a 16 MiB body took %v allocations, a 1 MiB one %v", allocs[1], allocs[0])
	}
}
