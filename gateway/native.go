package gateway

import (
	"net/http"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// NativeFront is llmedge's own public API, POST /tasks/assistant_inference:
// FastAPI-shaped errors, {"content",...} deltas and a final `event: done`
// carrying the whole answer.
type NativeFront struct {
	Validator *api.Validator
}

// Name implements Front.
func (NativeFront) Name() string { return "native" }

// Decode implements Front.
func (f NativeFront) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	req, body, err := f.Validator.ReadRequest(r)
	if err != nil {
		return api.Chat{}, nil, err
	}
	return req.Chat(), body, nil
}

// WriteError implements Front.
func (NativeFront) WriteError(w http.ResponseWriter, err *api.Error) { err.Write(w) }

// WriteAnswer implements Front.
func (NativeFront) WriteAnswer(w http.ResponseWriter, a *Answer) {
	writeJSONBytes(w, http.StatusOK, appendNativeResponse(make([]byte, 0, 192+len(a.Content)), a))
}

// AppendDelta implements Front: `data: {"content":"<text>"}`.
func (NativeFront) AppendDelta(b []byte, _ *Answer, text string) []byte {
	b = append(b, `data: {"content":`...)
	b = jsonx.String(b, text)
	return append(b, "}\n\n"...)
}

// AppendEnd implements Front: `event: done` with the whole answer.
func (NativeFront) AppendEnd(b []byte, a *Answer) []byte {
	b = append(b, "event: done\ndata: "...)
	b = appendNativeResponse(b, a)
	return append(b, "\n\n"...)
}

// AppendStreamError implements Front.
func (NativeFront) AppendStreamError(b []byte, _ *Answer, err *api.Error) []byte {
	return appendEvent(b, "error", marshal(map[string]any{"detail": err.Detail}))
}

// appendNativeResponse appends the api.InferenceResponse of a, as
// encoding/json would write it (TestNativeResponseEncoding holds it to
// that), without reflection: it is written once per request.
func appendNativeResponse(b []byte, a *Answer) []byte {
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

var _ Front = NativeFront{}
