package openaicompat

import (
	"encoding/json"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// continueWire is body as its door carries it through.
func continueWire(t *testing.T, body string) *api.Wire {
	t.Helper()
	var o wire.Request
	if err := wire.ReadRequest([]byte(body), &o); err != nil {
		t.Fatal(err)
	}
	w := &api.Wire{Format: api.FormatOpenAIChat, Body: []byte(body), Object: o.Body, Members: o.Members}
	if m, ok := w.Member("messages"); ok {
		_ = m.Value.Elements(func(_ int, e wire.Value) bool {
			w.Messages = append(w.Messages, e)
			return true
		})
	}
	return w
}

func TestContinueBody(t *testing.T) {
	tests := []struct {
		name string
		req  protocols.Request
		want string
	}{
		{"llmedge's own request", protocols.Request{Model: "m", Messages: []api.Message{{Role: "user", Content: "hi"}}, Continue: "Hel"},
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hel"}],"stream":true,"stream_options":{"include_usage":true},"continue_final_message":true,"add_generation_prompt":false}`},
		{"carried through", protocols.Request{Model: "u", Continue: "Hel", CapTokens: 6,
			Wire: continueWire(t, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stream":true}`)},
			`{"model":"u","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hel"}],"max_tokens":6,"stream":true,"continue_final_message":true,"add_generation_prompt":false,"stream_options":{"include_usage":true}}`},
		{"the client's template options replaced", protocols.Request{Model: "u", Continue: "x",
			Wire: continueWire(t, `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true,"stream":true}`)},
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}],"add_generation_prompt":false,"stream":true,"continue_final_message":true,"stream_options":{"include_usage":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkStreamBody(t, &tt.req, tt.want) })
	}
}

// completionWire is a text completions body as its door carries it through.
func completionWire(t *testing.T, body string) *api.Wire {
	t.Helper()
	w := continueWire(t, body)
	w.Format = api.FormatOpenAICompletions
	return w
}

// A text completion is continued with the text so far appended to its
// prompt, inside the prompt's JSON string.
func TestContinueCompletionBody(t *testing.T) {
	req := protocols.Request{Model: "u", Continue: "Hel\"lo", CapTokens: 6,
		Wire: completionWire(t, `{"model":"m","prompt":"Say \"hi\":","max_tokens":10,"stream":true}`)}
	checkStreamBody(t, &req, `{"model":"u","prompt":"Say \"hi\":Hel\"lo","max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}`)
}

func TestContinues(t *testing.T) {
	var p Protocol
	tests := []struct {
		name string
		req  protocols.Request
		want bool
	}{
		{"llmedge's own", protocols.Request{}, true},
		{"chat", protocols.Request{Wire: continueWire(t, `{"messages":[{"role":"user","content":"hi"}]}`)}, true},
		{"n 1", protocols.Request{Wire: continueWire(t, `{"messages":[{"role":"user","content":"hi"}],"n":1}`)}, true},
		{"n 2", protocols.Request{Wire: continueWire(t, `{"messages":[{"role":"user","content":"hi"}],"n":2}`)}, false},
		{"responses", protocols.Request{Wire: &api.Wire{Format: api.FormatOpenAIResponses}}, false},
		{"anthropic", protocols.Request{Wire: &api.Wire{Format: api.FormatAnthropicMessages}}, false},
		{"completion", protocols.Request{Wire: completionWire(t, `{"prompt":"hi","n":1,"best_of":1,"echo":false,"suffix":null}`)}, true},
		{"completion of prompts", protocols.Request{Wire: completionWire(t, `{"prompt":["hi","ho"]}`)}, false},
		{"completion of token ids", protocols.Request{Wire: completionWire(t, `{"prompt":[1,2]}`)}, false},
		{"completion n 2", protocols.Request{Wire: completionWire(t, `{"prompt":"hi","n":2}`)}, false},
		{"completion best_of 3", protocols.Request{Wire: completionWire(t, `{"prompt":"hi","best_of":3}`)}, false},
		{"completion echoed", protocols.Request{Wire: completionWire(t, `{"prompt":"hi","echo":true}`)}, false},
		{"completion with a suffix", protocols.Request{Wire: completionWire(t, `{"prompt":"hi","suffix":"end"}`)}, false},
	}
	for _, tt := range tests {
		if got := p.Continues(&tt.req); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// checkStreamBody holds the streamed request body written for req (a
// body carried through when req has one, else one the gateway writes) to
// want, and to valid JSON.
func checkStreamBody(t *testing.T, req *protocols.Request, want string) {
	t.Helper()
	var got []byte
	if req.Wire != nil {
		got = appendPassBody(nil, req, true)
	} else {
		var err error
		if got, err = appendChatRequest(nil, req, true); err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !json.Valid(got) {
		t.Fatal("invalid JSON")
	}
}
