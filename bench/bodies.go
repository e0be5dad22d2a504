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

// bytesReader wraps b for a request body; http.NewRequest recognises it
// and can replay it on a retried keep-alive connection.
func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
