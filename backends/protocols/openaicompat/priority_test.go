package openaicompat

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/members"
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
		{"carried through", protocols.Request{Model: "u", Priority: p(10), Members: []members.Edit{{Name: "priority", Value: []byte("10")}},
			Wire: continueWire(t, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)},
			`{"model":"u","messages":[{"role":"user","content":"hi"}],"stream":true,"priority":10,"stream_options":{"include_usage":true}}`},
		{"the client's own replaced", protocols.Request{Model: "u", Priority: p(0), Members: []members.Edit{{Name: "priority", Value: []byte("0")}},
			Wire: continueWire(t, `{"model":"m","priority":-100,"messages":[{"role":"user","content":"hi"}],"stream":true}`)},
			`{"model":"u","priority":0,"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkStreamBody(t, &tt.req, tt.want) })
	}
}

// The gateway's member edits reach the body on every door's format, the
// model's name removed beside them (one edit per run of members that go,
// the body valid JSON whichever they are).
func TestMemberEditsEveryFormat(t *testing.T) {
	salt := []members.Edit{{Name: "priority", Value: []byte("1")}, {Name: "cache_salt", Value: []byte(`"S"`)}}
	gone := []members.Edit{{Name: "priority"}, {Name: "cache_salt"}}
	tests := []struct {
		name   string
		format api.Format
		body   string
		model  string
		edits  []members.Edit
		want   string
	}{
		{"responses: the client's priority replaced", api.FormatOpenAIResponses,
			`{"model":"m","input":"hi","priority":-1000000,"store":false}`, "u", salt,
			`{"model":"u","input":"hi","priority":1,"store":false,"cache_salt":"S"}`},
		{"messages: priority and salt removed at the end", api.FormatAnthropicMessages,
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"priority":-1000000,"cache_salt":"x"}`, "u", gone,
			`{"model":"u","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
		{"embeddings: removed in the middle", api.FormatOpenAIEmbeddings,
			`{"priority":-5,"cache_salt":"x","model":"m","input":"hi"}`, "u", gone,
			`{"model":"u","input":"hi"}`},
		{"chat: the model removed after a removed member", api.FormatOpenAIChat,
			`{"messages":[{"role":"user","content":"hi"}],"priority":3,"model":"m"}`, "", gone,
			`{"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := continueWire(t, tt.body)
			w.Format = tt.format
			req := &protocols.Request{Model: tt.model, Wire: w, Members: tt.edits}
			got := appendPassBody(nil, req, false)
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			pieces, n := passBody(req, false)
			var joined []byte
			for _, p := range pieces {
				joined = append(joined, p...)
			}
			if string(joined) != tt.want || n != len(joined) {
				t.Fatalf("in pieces: %s (%d)", joined, n)
			}
		})
	}
}
