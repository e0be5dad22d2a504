package wire

import (
	"errors"
	"reflect"
	"testing"
)

func TestReadAnthropicMessage(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       AnthropicMessage
		bad        bool
	}{
		{name: "a message", data: `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"Hel"},` +
			`{"type":"tool_use","id":"t","name":"f","input":{"text":"no"}},{"type":"thinking","thinking":"x"},{"type":"text","text":"lo \u00e9"}],` +
			`"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":7,"cache_read_input_tokens":3,"cache_creation_input_tokens":null}}`,
			want: AnthropicMessage{Type: "message", Text: "Hello é", StopReason: "end_turn", Usage: AnthropicUsage{Given: true,
				InputTokens: Count{5, true}, OutputTokens: Count{7, true}, CacheReadInputTokens: Count{3, true}}}},
		{name: "count_tokens", data: `{"input_tokens":42}`, want: AnthropicMessage{InputTokens: Count{42, true}}},
		{name: "nulls", data: `{"type":"message","content":null,"stop_reason":null,"usage":null,"input_tokens":null}`,
			want: AnthropicMessage{Type: "message"}},
		{name: "a null block", data: `{"type":"message","content":[null,{"type":"text","text":"a"}]}`,
			want: AnthropicMessage{Type: "message", Text: "a"}},
		{name: "unknown members of any kind", data: `{"type":"message","x":[1,{"y":"\ud800"}],"content":[{"type":"text","text":"a","citations":[{}]}]}`,
			want: AnthropicMessage{Type: "message", Text: "a"}},
		{name: "a repeated content, the last counts", data: `{"content":[{"type":"text","text":"old"}],"type":"message","content":[{"text":"new","type":"text"}]}`,
			want: AnthropicMessage{Type: "message", Text: "new"}},
		{name: "escaped names", data: `{"typ\u0065":"message","cont\u0065nt":[{"type":"text","t\u0065xt":"a"}],"usag\u0065":{"input_tok\u0065ns":2}}`,
			want: AnthropicMessage{Type: "message", Text: "a", Usage: AnthropicUsage{Given: true, InputTokens: Count{2, true}}}},
		{name: "type a number", data: `{"type":1}`, bad: true},
		{name: "content an object", data: `{"type":"message","content":{"type":"text"}}`, bad: true},
		{name: "a block a string", data: `{"type":"message","content":["text"]}`, bad: true},
		{name: "text a number", data: `{"type":"message","content":[{"type":"text","text":1}]}`, bad: true},
		{name: "a count a string", data: `{"type":"message","usage":{"output_tokens":"7"}}`, bad: true},
		{name: "a count a fraction", data: `{"input_tokens":4.5}`, bad: true},
		{name: "usage a list", data: `{"type":"message","usage":[]}`, bad: true},
		{name: "not an object", data: `[1]`, bad: true},
		{name: "null", data: ` null `, want: AnthropicMessage{}},
		{name: "an error report", data: `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`,
			want: AnthropicMessage{Type: "error", Error: true}},
		{name: "an old engine's flat error", data: `{"object":"error","message":"bad","type":"BadRequestError","code":400}`,
			want: AnthropicMessage{Type: "BadRequestError", Object: "error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m AnthropicMessage
			err := ReadAnthropicMessage([]byte(tc.data), &m)
			m.Model = Value{} // TestReadAnthropicMessageModel
			switch {
			case tc.bad && err == nil:
				t.Fatalf("read %+v, want an error", m)
			case !tc.bad && err != nil:
				t.Fatal(err)
			case !tc.bad && !reflect.DeepEqual(m, tc.want):
				t.Fatalf("read %+v, want %+v", m, tc.want)
			}
		})
	}
}

func TestReadAnthropicEvent(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       AnthropicEvent
		bad        bool
	}{
		{name: "message_start", data: `{"type":"message_start","message":{"id":"m","model":"q","usage":{"input_tokens":9,"output_tokens":1}}}`,
			want: AnthropicEvent{Type: "message_start", MessageUsage: AnthropicUsage{Given: true, InputTokens: Count{9, true}, OutputTokens: Count{1, true}}}},
		{name: "a text delta", data: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"caf\u00e9"}}`,
			want: AnthropicEvent{Type: "content_block_delta", DeltaType: "text_delta", DeltaText: "café"}},
		{name: "message_delta", data: `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":16}}`,
			want: AnthropicEvent{Type: "message_delta", StopReason: "max_tokens", StopGiven: true, Usage: AnthropicUsage{Given: true, OutputTokens: Count{16, true}}}},
		{name: "a null stop_reason", data: `{"type":"message_delta","delta":{"stop_reason":null}}`,
			want: AnthropicEvent{Type: "message_delta"}},
		{name: "an error", data: `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`,
			want: AnthropicEvent{Type: "error", ErrorType: "overloaded_error"}},
		{name: "nulls", data: `{"type":"ping","message":null,"delta":null,"usage":null,"error":null}`, want: AnthropicEvent{Type: "ping"}},
		{name: "truncated", data: `{"type":"content_block_delta","delta":{"type":"text_delta"`, bad: true},
		{name: "trailing bytes", data: `{"type":"ping"} {}`, bad: true},
		{name: "not an object", data: `["ping"]`, bad: true},
		{name: "delta a string", data: `{"type":"content_block_delta","delta":"x"}`, bad: true},
		{name: "text a number", data: `{"type":"content_block_delta","delta":{"type":"text_delta","text":1}}`, bad: true},
		{name: "a count a string", data: `{"type":"message_delta","usage":{"output_tokens":"1"}}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e AnthropicEvent
			err := ReadAnthropicEvent([]byte(tc.data), &e)
			switch {
			case tc.bad && err == nil:
				t.Fatalf("read %+v, want an error", e)
			case !tc.bad && err != nil:
				t.Fatal(err)
			case !tc.bad && e != tc.want:
				t.Fatalf("read %+v, want %+v", e, tc.want)
			}
		})
	}
}

// The answer is read in one pass: its model with its span (a door puts
// its own name there), an error report told even beside a member of the
// wrong type, and malformed JSON told from a member of the wrong type.
func TestReadAnthropicMessageModel(t *testing.T) {
	data := []byte(`{"type":"message", "model" : "qwen-7b","content":[]}`)
	var m AnthropicMessage
	if err := ReadAnthropicMessage(data, &m); err != nil {
		t.Fatal(err)
	}
	if got := string(data[m.Model.Start:m.Model.End]); got != `"qwen-7b"` || string(m.Model.Raw) != got {
		t.Fatalf("model span %d-%d: %q (raw %q)", m.Model.Start, m.Model.End, got, m.Model.Raw)
	}
	err := ReadAnthropicMessage([]byte(`{"usage":"x","error":{"type":"api_error"}}`), &m)
	var we *Error
	if err == nil || errors.As(err, &we) || !m.IsError() {
		t.Fatalf("an error report with a bad usage: %v (a JSON fault: %v), IsError %v", err, we != nil, m.IsError())
	}
	// Content and usage are read in place: a fault inside them, even
	// after a member of the wrong type, is still a JSON fault.
	for _, bad := range []string{`{"type":"message"`, `{"type":"message"} x`, `[]`, `"message"`,
		`{"content":[{"type":"text","text":"a"]}`, `{"content":["x",{]}`, `{"usage":{"input_tokens":"1","x":}}`, `{"usage":{"input_tokens":1,}}`} {
		if err := ReadAnthropicMessage([]byte(bad), &m); !errors.As(err, &we) {
			t.Errorf("%s: %v, want a JSON fault (*Error)", bad, err)
		}
	}
}
