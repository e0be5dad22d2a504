package openaicompat

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// The class's engine priority goes to the replica as vLLM takes it: a
// "priority" member, replacing a client's own.
func TestPriorityBody(t *testing.T) {
	p := func(n int) *int { return &n }
	msgs := []api.Message{{Role: "user", Content: "hi"}}
	tests := []struct {
		name string
		req  protocols.Request
		want string
	}{
		{"llmedge's own request", protocols.Request{Model: "m", Messages: msgs, Priority: p(-5)},
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"priority":-5}`},
		{"none", protocols.Request{Model: "m", Messages: msgs},
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"carried through", protocols.Request{Model: "u", Priority: p(10),
			Wire: continueWire(t, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)},
			`{"model":"u","messages":[{"role":"user","content":"hi"}],"stream":true,"priority":10,"stream_options":{"include_usage":true}}`},
		{"the client's own replaced", protocols.Request{Model: "u", Priority: p(0),
			Wire: continueWire(t, `{"model":"m","priority":-100,"messages":[{"role":"user","content":"hi"}],"stream":true}`)},
			`{"model":"u","priority":0,"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkStreamBody(t, &tt.req, tt.want) })
	}
}
