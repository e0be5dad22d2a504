package reserve

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

// formats are the doors' formats a fuzzed body is counted as.
var formats = []api.Format{api.FormatOpenAIChat, api.FormatOpenAICompletions, api.FormatOpenAIEmbeddings,
	api.FormatOpenAIResponses, api.FormatAnthropicMessages, api.FormatAnthropicCountTokens}

// FuzzCount: counting any body a door could carry never panics, never
// estimates less than the messages-only estimate admission made before,
// and reports at least one prompt and one generation (seeds in
// testdata/fuzz/FuzzCount).
func FuzzCount(f *testing.F) {
	f.Add(uint8(0), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":128,"tools":[{"type":"function"}]}`))
	f.Add(uint8(1), []byte(`{"model":"m","prompt":[[1,2],[3],"x",4,5],"best_of":3,"max_tokens":"7"}`))
	f.Add(uint8(3), []byte(`{"model":"m","input":[{"content":[{"type":"input_image","image_url":"u"}]}],"max_tokens":1}`))
	f.Add(uint8(4), []byte(`{"model":"m","max_tokens":9,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`))
	f.Fuzz(func(t *testing.T, fi uint8, body []byte) {
		var o wire.Request
		if wire.ReadRequest(body, &o) != nil || o.Body.Kind() != wire.Object {
			return // a door refuses it
		}
		w := &api.Wire{Format: formats[int(fi)%len(formats)], Body: body, Object: o.Body, Members: o.Members}
		if w.Format == api.FormatOpenAIChat {
			// As the chat door hands it over: the messages' spans read.
			var c wire.Chat
			if wire.ReadChat(body, &c) != nil {
				return
			}
			w.Members = c.Members
			for _, m := range c.Items {
				w.Messages = append(w.Messages, m.Value)
			}
		}
		c := Of(w)
		// The doors count the conversation as they read it: the same
		// count (but for an Anthropic system of blocks, which that door
		// refuses unless they are text).
		if cw, ok := convRead(w.Format, body); ok {
			if sys, _ := cw.Member("system"); !(sys.Value.Kind() == wire.Array && (w.Format == api.FormatAnthropicMessages || w.Format == api.FormatAnthropicCountTokens)) {
				if got := Of(cw); got.Tokens != c.Tokens || got.Messages != c.Messages || got.Bytes != c.Bytes {
					t.Fatalf("%s as %s: counted from the door's reading %+v, from the body %+v", body, w.Format, got, c)
				}
			}
		}
		if got, floor := c.PromptTokens(), messagesOnly(w); got < floor {
			t.Fatalf("%s: estimated %d tokens, below the messages-only %d", body, got, floor)
		}
		if c.Prompts < 1 || c.Generations < 1 || c.Generations > MaxGenerations || c.ReplyCap < 0 || c.Bytes < 0 || c.Tokens < 0 {
			t.Fatalf("%s: %+v", body, c)
		}
	})
}
