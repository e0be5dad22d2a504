package openaicompat

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// TestCapTokensEveryName: the reply cap the gateway reserved holds under
// every name the engine honours for the format: a larger one (or one
// that is not a plain count) is lowered, a smaller one kept, and a body
// without any gets the format's usual one.
func TestCapTokensEveryName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format api.Format
		body   string
		want   string
	}{
		{"chat: both names above", api.FormatOpenAIChat, `{"model":"m","max_tokens":500,"max_completion_tokens":900}`,
			`{"model":"u","max_tokens":20,"max_completion_tokens":20}`},
		{"chat: a smaller one kept", api.FormatOpenAIChat, `{"model":"m","max_tokens":5,"max_completion_tokens":900}`,
			`{"model":"u","max_tokens":5,"max_completion_tokens":20}`},
		{"chat: none given", api.FormatOpenAIChat, `{"model":"m"}`, `{"model":"u","max_tokens":20}`},
		{"completions", api.FormatOpenAICompletions, `{"model":"m","prompt":"x","max_tokens":"4000"}`,
			`{"model":"u","prompt":"x","max_tokens":20}`},
		{"responses: max_tokens beside max_output_tokens", api.FormatOpenAIResponses,
			`{"model":"m","store":false,"max_output_tokens":10,"max_tokens":100000}`,
			`{"model":"u","store":false,"max_output_tokens":10,"max_tokens":20}`},
		{"responses: none given", api.FormatOpenAIResponses, `{"model":"m","store":false}`,
			`{"model":"u","store":false,"max_output_tokens":20}`},
		{"messages: max_completion_tokens beside max_tokens", api.FormatAnthropicMessages,
			`{"model":"m","max_tokens":10,"max_completion_tokens":100000}`,
			`{"model":"u","max_tokens":10,"max_completion_tokens":20}`},
		{"a fraction is not a plain count", api.FormatOpenAIChat, `{"model":"m","max_tokens":1.5e9}`,
			`{"model":"u","max_tokens":20}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			var o wire.Request
			if err := wire.ReadRequest(body, &o); err != nil {
				t.Fatal(err)
			}
			req := &protocols.Request{Model: "u", CapTokens: 20,
				Wire: &api.Wire{Format: tc.format, Body: body, Object: o.Body, Members: o.Members}}
			if got := string(appendPassBody(nil, req, false)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
