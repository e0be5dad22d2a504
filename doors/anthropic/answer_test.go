package anthropic

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/wire"
)

func testAnswer() *gateway.Answer {
	return &gateway.Answer{ID: "r1", Model: "qwen", Usage: api.Usage{PromptTokens: 9, CompletionTokens: 4, TotalTokens: 13}, UsageKnown: true}
}

func writeAnswer(t *testing.T, a *gateway.Answer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	(&Door{}).WriteAnswer(rec, a)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	return rec.Body.String()
}

func TestWriteAnswer(t *testing.T) {
	// The replica's own message, renamed.
	raw := `{"id":"msg_x","type":"message","model":"Qwen/Qwen3","content":[]}`
	a := testAnswer()
	a.Raw, a.RawFormat = []byte(raw), api.FormatAnthropicMessages
	a.RawModel = wire.Value{Raw: []byte(`"Qwen/Qwen3"`), Start: strings.Index(raw, `"Qwen`), End: strings.Index(raw, `,"content"`)}
	if got := writeAnswer(t, a); got != `{"id":"msg_x","type":"message","model":"qwen","content":[]}`+"\n" {
		t.Fatalf("relayed: %s", got)
	}

	// count_tokens' answer, as is.
	a = testAnswer()
	a.Raw, a.RawFormat = []byte(`{"input_tokens":12}`), api.FormatAnthropicCountTokens
	if got := writeAnswer(t, a); got != `{"input_tokens":12}`+"\n" {
		t.Fatalf("count: %s", got)
	}

	// A chat completion, translated.
	for _, c := range []struct{ name, chat, want string }{
		{"text", `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"length"}]}`,
			`{"id":"msg_r1","type":"message","role":"assistant","model":"qwen","content":[{"type":"text","text":"Hello"}],` +
				`"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":4}}`},
		{"tools and reasoning", `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"Think",` +
			`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},` +
			`{"type":"function","function":{"name":"g","arguments":"{\"cut"}}]},"finish_reason":"tool_calls"}]}`,
			`{"id":"msg_r1","type":"message","role":"assistant","model":"qwen","content":[{"type":"thinking","thinking":"Think","signature":"bGxtZWRnZTpyMQ"},` +
				`{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}},{"type":"tool_use","id":"toolu_r1_1","name":"g","input":{}}],` +
				`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":4}}`},
		{"stop sequence", `{"choices":[{"index":0,"message":{"content":"Hi"},"finish_reason":"stop","stop_reason":"END"}]}`,
			`{"id":"msg_r1","type":"message","role":"assistant","model":"qwen","content":[{"type":"text","text":"Hi"}],` +
				`"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":9,"output_tokens":4}}`},
		{"eos token", `{"choices":[{"index":0,"message":{"content":"Hi"},"finish_reason":"stop","stop_reason":151645}]}`,
			`{"id":"msg_r1","type":"message","role":"assistant","model":"qwen","content":[{"type":"text","text":"Hi"}],` +
				`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":4}}`},
	} {
		a := testAnswer()
		a.Raw, a.RawFormat = []byte(c.chat), api.FormatOpenAIChat
		if got := writeAnswer(t, a); got != c.want+"\n" {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, got, c.want)
		}
	}

	// Text alone (a protocol that translates), usage unknown.
	a = &gateway.Answer{ID: "r2", Model: "gemma", Content: "Hi there", FinishReason: "stop"}
	want := `{"id":"msg_r2","type":"message","role":"assistant","model":"gemma","content":[{"type":"text","text":"Hi there"}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}`
	if got := writeAnswer(t, a); got != want+"\n" {
		t.Fatalf("text:\n%s\nwant\n%s", got, want)
	}
}

// events renders a stream as "name data" lines.
func events(s string) []string {
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		name, data, _ := strings.Cut(ev, "\ndata: ")
		out = append(out, strings.TrimPrefix(name, "event: ")+" "+data)
	}
	return out
}

func checkEvents(t *testing.T, got string, want []string) {
	t.Helper()
	g := events(got)
	if len(g) != len(want) {
		t.Fatalf("%d events:\n%s\nwant %d:\n%s", len(g), strings.Join(g, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if g[i] != want[i] {
			t.Errorf("event %d:\n%s\nwant\n%s", i, g[i], want[i])
		}
	}
}

const messageStart = `message_start {"type":"message_start","message":{"id":"msg_r1","type":"message","role":"assistant","model":"qwen",` +
	`"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`

func TestStreamTranslated(t *testing.T) {
	d := &Door{}
	a := testAnswer()
	chunk := func(s string) *protocols.Delta {
		return &protocols.Delta{Data: []byte(s), Format: api.FormatOpenAIChat}
	}
	var b []byte
	for _, c := range []*protocols.Delta{
		chunk(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`),
		chunk(`{"choices":[{"index":0,"delta":{"reasoning_content":"Hm"}}]}`),
		chunk(`{"choices":[{"index":0,"delta":{"content":"Let"}}]}`),
		chunk(`{"choices":[{"index":0,"delta":{"content":" me."}}]}`),
		chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}}]}`),
		chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}`),
		chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}`),
		chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"g","arguments":"{}"}}]}}]}`),
		chunk(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`),
		{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}`), Format: api.FormatOpenAIChat, UsageOnly: true},
	} {
		b = d.AppendDelta(b, a, c)
	}
	b = d.AppendEnd(b, a)
	checkEvents(t, string(b), []string{
		messageStart,
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hm"}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"bGxtZWRnZTpyMQ"}}`,
		`content_block_stop {"type":"content_block_stop","index":0}`,
		`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let"}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" me."}}`,
		`content_block_stop {"type":"content_block_stop","index":1}`,
		`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_a","name":"f","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":":1}"}}`,
		`content_block_stop {"type":"content_block_stop","index":2}`,
		`content_block_start {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_r1_1","name":"g","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
		`content_block_stop {"type":"content_block_stop","index":3}`,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":4}}`,
		`message_stop {"type":"message_stop"}`,
	})

	// A stop string (vLLM's stop_reason) ends the message at it.
	a = testAnswer()
	b = d.AppendDelta(nil, a, chunk(`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`))
	b = d.AppendDelta(b, a, chunk(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"END"}]}`))
	b = d.AppendEnd(b, a)
	if !strings.Contains(string(b), `"delta":{"stop_reason":"stop_sequence","stop_sequence":"END"}`) {
		t.Fatalf("stop sequence: %s", b)
	}
}

func TestStreamFromText(t *testing.T) {
	d := &Door{}
	a := testAnswer()
	a.FinishReason = "length"
	b := d.AppendDelta(nil, a, &protocols.Delta{Text: "Hel", Token: true})
	b = d.AppendDelta(b, a, &protocols.Delta{Text: "lo", Token: true})
	b = d.AppendEnd(b, a)
	checkEvents(t, string(b), []string{
		messageStart,
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
		`content_block_stop {"type":"content_block_stop","index":0}`,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":4}}`,
		`message_stop {"type":"message_stop"}`,
	})

	// An empty reply is a message without blocks.
	a = testAnswer()
	checkEvents(t, string(d.AppendEnd(nil, a)), []string{
		messageStart,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":4}}`,
		`message_stop {"type":"message_stop"}`,
	})
}

func TestStreamRelayed(t *testing.T) {
	d := &Door{}
	a := testAnswer()
	start := `{"type":"message_start","message":{"id":"msg_1","model":"Qwen/Qwen3","content":[]}}`
	i := strings.Index(start, `"Qwen`)
	model := wire.Value{Raw: []byte(`"Qwen/Qwen3"`), Start: i, End: i + len(`"Qwen/Qwen3"`)}
	relay := func(b []byte, event, data string, m wire.Value) []byte {
		return d.AppendDelta(b, a, &protocols.Delta{Data: []byte(data), Event: event, Format: api.FormatAnthropicMessages, Model: m})
	}
	b := relay(nil, "message_start", start, model)
	b = relay(b, "ping", `{"type": "ping"}`, wire.Value{})
	b = relay(b, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, wire.Value{})
	b = relay(b, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`, wire.Value{})
	if !a.Relayed {
		t.Fatal("not marked relayed")
	}
	// The replica's stream ended after its stop_reason, without
	// message_stop: the end adds it.
	b = d.AppendEnd(b, a)
	checkEvents(t, string(b), []string{
		`message_start {"type":"message_start","message":{"id":"msg_1","model":"qwen","content":[]}}`,
		`ping {"type": "ping"}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
		`message_stop {"type":"message_stop"}`,
	})
	// With its message_stop, the end adds nothing.
	a = testAnswer()
	b = relay(nil, "message_stop", `{"type":"message_stop"}`, wire.Value{})
	if end := d.AppendEnd(nil, a); len(end) != 0 {
		t.Fatalf("end after message_stop: %q", end)
	}
	// An attempt begins afresh (the gateway resets State).
	a.State = nil
	if got := string(d.AppendDelta(nil, a, &protocols.Delta{Text: "x"})); !strings.HasPrefix(got, "event: message_start") {
		t.Fatalf("a new attempt: %s", got)
	}
}

func TestStreamError(t *testing.T) {
	a := testAnswer()
	b := (&Door{}).AppendStreamError(nil, a, api.NewError(http.StatusGatewayTimeout, "The replica did not answer in time"))
	want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"timeout_error\",\"message\":\"The replica did not answer in time\"},\"request_id\":\"r1\"}\n\n"
	if string(b) != want {
		t.Fatalf("%q", b)
	}
}

// TestReasoningAnswers holds the engines' reasoning output (vLLM's and
// SGLang's reasoning_content, newer vLLM's reasoning) to the thinking
// blocks Anthropic's clients read: first, signed by the gateway.
func TestReasoningAnswers(t *testing.T) {
	const sig = `"signature":"bGxtZWRnZTpyMQ"`
	for _, c := range []struct{ name, chat, content string }{
		{"reasoning_content", `{"choices":[{"index":0,"message":{"content":"Hi","reasoning_content":"Why"},"finish_reason":"stop"}]}`,
			`[{"type":"thinking","thinking":"Why",` + sig + `},{"type":"text","text":"Hi"}]`},
		{"reasoning", `{"choices":[{"index":0,"message":{"content":"Hi","reasoning":"Why"},"finish_reason":"stop"}]}`,
			`[{"type":"thinking","thinking":"Why",` + sig + `},{"type":"text","text":"Hi"}]`},
		{"empty reasoning", `{"choices":[{"index":0,"message":{"content":"Hi","reasoning_content":""},"finish_reason":"stop"}]}`,
			`[{"type":"text","text":"Hi"}]`},
		{"reasoning alone", `{"choices":[{"index":0,"message":{"content":null,"reasoning":"Why"},"finish_reason":"length"}]}`,
			`[{"type":"thinking","thinking":"Why",` + sig + `}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := testAnswer()
			a.Raw, a.RawFormat = []byte(c.chat), api.FormatOpenAIChat
			var m struct {
				Content json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal([]byte(writeAnswer(t, a)), &m); err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, string(m.Content), c.content)
		})
	}

	// Streamed: newer vLLM's delta.reasoning; a stream that ends in its
	// thinking still signs the block before its end.
	d := &Door{}
	a := testAnswer()
	chunk := func(s string) *protocols.Delta {
		return &protocols.Delta{Data: []byte(s), Format: api.FormatOpenAIChat}
	}
	b := d.AppendDelta(nil, a, chunk(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`))
	b = d.AppendDelta(b, a, chunk(`{"choices":[{"index":0,"delta":{"reasoning":"A"}}]}`))
	b = d.AppendDelta(b, a, chunk(`{"choices":[{"index":0,"delta":{"reasoning":"B"},"finish_reason":"length"}]}`))
	b = d.AppendEnd(b, a)
	checkEvents(t, string(b), []string{
		messageStart,
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"A"}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"B"}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta",` + sig + `}}`,
		`content_block_stop {"type":"content_block_stop","index":0}`,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":4}}`,
		`message_stop {"type":"message_stop"}`,
	})
}
