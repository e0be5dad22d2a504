package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/wire"
)

// relayed is d as a replica's chunk carried through, its model found.
func relayed(t *testing.T, data string) *protocols.Delta {
	t.Helper()
	var a wire.Answer
	if err := wire.ReadAnswer([]byte(data), &a); err != nil {
		t.Fatal(err)
	}
	return &protocols.Delta{Data: []byte(data), Format: api.FormatOpenAIChat, Model: a.Model, Token: true}
}

func TestSplicedStream(t *testing.T) {
	door := New(api.Limits{}, []string{"qwen"})
	a := &gateway.Answer{ID: "req1", Model: "qwen"}
	// The first attempt's chunks, relayed as they are.
	first := door.AppendDelta(nil, a, relayed(t, `{"id":"chatcmpl-A","object":"chat.completion.chunk","created":111,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`))
	if !a.Relayed {
		t.Fatal("not relayed")
	}
	if !door.Continue(a, first) {
		t.Fatal("Continue refused the stream")
	}
	a.Continued, a.Before = 1, 1
	tests := []struct {
		name, in string
		want     map[string]any
	}{
		{"the continuation's role chunk loses its role and takes the stream's id",
			`{"id":"chatcmpl-B","object":"chat.completion.chunk","created":222,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"lo"},"finish_reason":null}]}`,
			map[string]any{"id": "chatcmpl-A", "created": 111.0, "model": "qwen", "delta": map[string]any{"content": "lo"}}},
		{"a usage chunk counts the whole answer",
			`{"id":"chatcmpl-B","object":"chat.completion.chunk","created":222,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}}`,
			map[string]any{"id": "chatcmpl-A", "usage": map[string]any{"prompt_tokens": 10.0, "completion_tokens": 5.0, "total_tokens": 15.0, "llmedge_continuations": 1.0}}},
		{"usage null stays null",
			`{"id":"chatcmpl-B","object":"chat.completion.chunk","created":222,"model":"m","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}],"usage":null}`,
			map[string]any{"id": "chatcmpl-A", "usage": nil, "delta": map[string]any{"content": "!"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.IncludeUsage = true
			out := door.AppendDelta(nil, a, relayed(t, tt.in))
			var got map[string]any
			if err := json.Unmarshal(out[len("data: "):len(out)-2], &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			for k, want := range tt.want {
				var have any = got[k]
				if k == "delta" {
					have = got["choices"].([]any)[0].(map[string]any)["delta"]
				}
				if !equalJSON(have, want) {
					t.Errorf("%s = %v, want %v (%s)", k, have, want, out)
				}
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestContinueOwnChunks(t *testing.T) {
	door := New(api.Limits{}, []string{"qwen"})
	a := &gateway.Answer{ID: "req1", Model: "qwen"}
	door.AppendDelta(nil, a, &protocols.Delta{Text: "Hel", Token: true})
	a.Deltas = 1
	if !door.Continue(a, nil) || a.Splice != nil {
		t.Fatal("the door's own chunks need nothing to continue")
	}
	a.Continued = 1
	out := string(door.AppendDelta(nil, a, &protocols.Delta{Text: "lo", Token: true}))
	if want := `"delta":{"content":"lo"}`; !strings.Contains(out, want) || strings.Contains(out, "role") {
		t.Errorf("%s", out)
	}
	// A stream the door cannot read an id from is not continued.
	b := &gateway.Answer{ID: "req2", Model: "qwen", Relayed: true}
	if door.Continue(b, []byte("garbage")) {
		t.Error("continued a stream without an id")
	}
	if (Responses{door}).Continue(a, nil) {
		t.Error("a Responses stream continues")
	}
}

// A text completion's stream is continued as a chat stream is: the
// continuation's chunks take the stream's id and creation time.
func TestSplicedCompletionStream(t *testing.T) {
	door := New(api.Limits{}, []string{"qwen"})
	c := Completions{door}
	a := &gateway.Answer{ID: "req1", Model: "qwen"}
	chunk := func(data string) *protocols.Delta {
		d := relayed(t, data)
		d.Format = api.FormatOpenAICompletions
		return d
	}
	first := c.AppendDelta(nil, a, chunk(`{"id":"cmpl-A","object":"text_completion","created":111,"model":"m","choices":[{"index":0,"text":"Hel","logprobs":null,"finish_reason":null}]}`))
	if !c.Continue(a, first) {
		t.Fatal("Continue refused the stream")
	}
	a.Continued, a.Before = 1, 1
	out := string(c.AppendDelta(nil, a, chunk(`{"id":"cmpl-B","object":"text_completion","created":222,"model":"m","choices":[{"index":0,"text":"lo","logprobs":null,"finish_reason":null}]}`)))
	if want := `data: {"id":"cmpl-A","object":"text_completion","created":111,"model":"qwen","choices":[{"index":0,"text":"lo","logprobs":null,"finish_reason":null}]}`; !strings.HasPrefix(out, want) {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}
