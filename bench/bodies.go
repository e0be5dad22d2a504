package bench

import (
	"bytes"
	"io"
)

// The request every path gets, in the two shapes: OpenAI's chat
// completions for the replica and stock Caddy, llmedge's public API for
// llmedge. The simulator's reply depends only on the messages and its
// own configuration, so all three paths get the same tokens.
const (
	benchModel   = "bench"
	benchMessage = `[{"role":"user","content":"Hello, benchmark! Say something."}]`

	openAIBody       = `{"model":"sim-model","messages":` + benchMessage + `}`
	openAIStreamBody = `{"model":"sim-model","messages":` + benchMessage + `,"stream":true}`
	gatewayBody      = `{"messages":` + benchMessage + `,"model_type":"` + benchModel + `"}`
	gatewayStream    = `{"messages":` + benchMessage + `,"model_type":"` + benchModel + `","stream":true}`
)

// largeBody is a chat request whose one user message is a prompt of n
// bytes as JSON spells it: words, punctuation, newlines, escapes and
// multi-byte characters, as a long document pasted into a conversation.
// model is the model member, as JSON ("model":"bench").
func largeBody(model string, n int) []byte {
	words := []string{"the", "gateway", "carries", "a", "long", "document", "through", "to", "its", "replica,",
		"byte", "for", "byte;", `caf\u00e9`, "naïve", `\\path`, `\"quoted\"`, "42", "3.14", `end.\n`}
	b := make([]byte, 0, n+128)
	b = append(b, `{`+model+`,"messages":[{"role":"user","content":"`...)
	start := len(b)
	for i := 0; ; i++ {
		w := words[(i*7+i/len(words))%len(words)]
		if len(b)-start+1+len(w) > n {
			break
		}
		if len(b) > start {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	for len(b)-start < n {
		b = append(b, '.') // whole words only: pad to the size
	}
	return append(b, `"}]}`...)
}

// bytesReader wraps b for a request body; http.NewRequest recognises it
// and can replay it on a retried keep-alive connection.
func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
