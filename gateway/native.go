package gateway

import (
	"net/http"

	"github.com/llmedge/llmedge/api"
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
	api.WriteJSON(w, http.StatusOK, nativeResponse(a))
}

// AppendDelta implements Front.
func (NativeFront) AppendDelta(b []byte, _ *Answer, text string) []byte {
	return appendEvent(b, "", marshal(api.StreamDelta{Content: text}))
}

// AppendEnd implements Front.
func (NativeFront) AppendEnd(b []byte, a *Answer) []byte {
	return appendEvent(b, "done", marshal(nativeResponse(a)))
}

// AppendStreamError implements Front.
func (NativeFront) AppendStreamError(b []byte, _ *Answer, err *api.Error) []byte {
	return appendEvent(b, "error", marshal(map[string]any{"detail": err.Detail}))
}

func nativeResponse(a *Answer) api.InferenceResponse {
	resp := api.InferenceResponse{
		Content:        a.Content,
		ModelType:      a.Model,
		Usage:          a.Usage,
		ProcessingTime: seconds(a.Processing),
		InferenceTime:  seconds(a.Inference),
		MessageCount:   a.MessageCount,
	}
	if !a.UsageKnown {
		// Never invent numbers: the zeros are flagged as unknown.
		resp.UsageReported = api.UsageNotReported()
	}
	return resp
}

var _ Front = NativeFront{}
