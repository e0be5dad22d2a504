package anthropic

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/wire"
)

func chatChunk(s string) *protocols.Delta {
	return &protocols.Delta{Data: []byte(s), Format: api.FormatOpenAIChat}
}

// continued has d continue a's stream after last twice (a continuation
// of a continuation), as the gateway does: each continuation's attempt
// starts without the door's state, and writes a role chunk and a text
// chunk; the last one ends the stream. It returns what the continuations
// wrote.
func continued(t *testing.T, d *Door, a *gateway.Answer, last []byte) string {
	t.Helper()
	var all []byte
	for i, text := range []string{" wor", "ld"} {
		if !d.Continue(a, last) {
			t.Fatalf("continuation %d refused", i+1)
		}
		a.State = nil
		b := d.AppendDelta(nil, a, chatChunk(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`))
		b = d.AppendDelta(b, a, chatChunk(`{"choices":[{"index":0,"delta":{"content":"`+text+`"}}]}`))
		all, last = append(all, b...), b
	}
	b := d.AppendDelta(nil, a, chatChunk(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`))
	return string(d.AppendEnd(append(all, b...), a))
}

// A stream continued goes on in the text block the client has open,
// whether the replica's own events were relayed or the door translated a
// chat stream: deltas of that block, one content_block_stop, one
// message_delta with the answer's usage; no second message_start, no
// second block.
func TestContinueStream(t *testing.T) {
	d := &Door{}
	wantTail := func(index string) []string {
		return []string{
			`content_block_delta {"type":"content_block_delta","index":` + index + `,"delta":{"type":"text_delta","text":" wor"}}`,
			`content_block_delta {"type":"content_block_delta","index":` + index + `,"delta":{"type":"text_delta","text":"ld"}}`,
			`content_block_stop {"type":"content_block_stop","index":` + index + `}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":4}}`,
			`message_stop {"type":"message_stop"}`,
		}
	}

	t.Run("translated", func(t *testing.T) {
		a := testAnswer()
		b := d.AppendDelta(nil, a, chatChunk(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`))
		b = d.AppendDelta(b, a, chatChunk(`{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`))
		checkEvents(t, continued(t, d, a, b), wantTail("0"))
	})

	t.Run("relayed", func(t *testing.T) {
		a := testAnswer()
		relay := func(b []byte, event, data string) []byte {
			return d.AppendDelta(b, a, &protocols.Delta{Data: []byte(data), Event: event, Format: api.FormatAnthropicMessages})
		}
		b := relay(nil, "message_start", `{"type":"message_start","message":{"id":"msg_1","content":[]}}`)
		b = relay(b, "content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
		// The events a first token releases come at once: the last is
		// the one to go on from.
		b = relay(b, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}`)
		checkEvents(t, continued(t, d, a, b), wantTail("1"))
	})

	t.Run("not after other output", func(t *testing.T) {
		a := testAnswer()
		last := d.AppendDelta(nil, a, &protocols.Delta{Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hm"}}`),
			Event: "content_block_delta", Format: api.FormatAnthropicMessages, Model: wire.Value{}})
		if d.Continue(a, last) {
			t.Error("a relayed thinking block continued")
		}
		a = testAnswer()
		b := d.AppendDelta(nil, a, chatChunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}}]}`))
		if d.Continue(a, b) {
			t.Error("a translated tool call continued")
		}
	})
}
