// Package native is llmedge's own public API, POST
// /tasks/assistant_inference: FastAPI-shaped errors, {"content":...}
// deltas and a final `event: done` carrying the whole answer.
package native

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// Path is where the door takes chat requests.
const Path = "/tasks/assistant_inference"

// Door is the native API's codec: it decodes a chat request and writes
// answers, streams and errors in the native shapes.
type Door struct {
	Validator *api.Validator
}

// Name implements gateway.Door.
func (Door) Name() string { return "native" }

// Decode implements gateway.Door.
func (d Door) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	req, body, lease, err := d.Validator.ReadRequestLeased(r)
	if err != nil {
		return api.Chat{}, nil, err
	}
	// The messages are left as written (api.Message.Quoted), pointing
	// into the body: the replica's body splices them, in place when
	// large, holding the lease.
	chat := req.Chat()
	chat.Lease = lease
	return chat, body, nil
}

// WriteError implements gateway.Door.
func (Door) WriteError(w http.ResponseWriter, err *api.Error) { err.Write(w) }

// WriteAnswer implements gateway.Door.
func (Door) WriteAnswer(w http.ResponseWriter, a *gateway.Answer) {
	api.WriteBody(w, http.StatusOK, appendResponse(make([]byte, 0, 192+len(a.Content)), a))
}

// AppendDelta implements gateway.Door: `data: {"content":"<text>"}`; an
// event without text (a replica's opening or closing chunk) shows
// nothing.
func (Door) AppendDelta(b []byte, _ *gateway.Answer, d *protocols.Delta) []byte {
	if d.Text == "" {
		return b
	}
	b = append(b, `data: {"content":`...)
	b = jsonx.String(b, d.Text)
	return append(b, "}\n\n"...)
}

// AppendEnd implements gateway.Door: `event: done` with the whole answer.
func (Door) AppendEnd(b []byte, a *gateway.Answer) []byte {
	b = append(b, "event: done\ndata: "...)
	b = appendResponse(b, a)
	return append(b, "\n\n"...)
}

// AppendStreamError implements gateway.Door: `event: error` with the
// detail.
func (Door) AppendStreamError(b []byte, _ *gateway.Answer, err *api.Error) []byte {
	payload, merr := json.Marshal(map[string]any{"detail": err.Detail})
	if merr != nil {
		payload = []byte(`{}`)
	}
	b = append(b, "event: error\ndata: "...)
	b = append(b, payload...)
	return append(b, '\n', '\n')
}

// appendResponse appends the api.InferenceResponse of a, as encoding/json
// would write it (TestResponseEncoding holds it to that), without
// reflection: it is written once per request.
func appendResponse(b []byte, a *gateway.Answer) []byte {
	b = append(b, `{"content":`...)
	b = jsonx.String(b, a.Content)
	b = append(b, `,"model_type":`...)
	b = jsonx.String(b, a.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = jsonx.Int(b, int64(a.Usage.PromptTokens))
	b = append(b, `,"completion_tokens":`...)
	b = jsonx.Int(b, int64(a.Usage.CompletionTokens))
	b = append(b, `,"total_tokens":`...)
	b = jsonx.Int(b, int64(a.Usage.TotalTokens))
	b = append(b, '}')
	if !a.UsageKnown {
		// Never invent numbers: the zeros are flagged as unknown.
		b = append(b, `,"usage_reported":false`...)
	}
	b = append(b, `,"processing_time":`...)
	b = jsonx.Float(b, seconds(a.Processing))
	b = append(b, `,"inference_time":`...)
	b = jsonx.Float(b, seconds(a.Inference))
	b = append(b, `,"message_count":`...)
	b = jsonx.Int(b, int64(a.MessageCount))
	return append(b, '}')
}

// seconds rounds d to microseconds, as the public timing fields carry it.
func seconds(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1e6
}

var _ gateway.Door = Door{}

var _ gateway.Continuer = Door{}

// Continue implements gateway.Continuer: the native events carry the
// text alone, so a continuation's read as the same stream's as they are.
func (Door) Continue(*gateway.Answer, []byte) bool { return true }
