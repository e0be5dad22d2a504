package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// testPath is where the package's tests send chats.
const testPath = "/tasks/assistant_inference"

// testDoor is the door of the package's tests: the native API's
// validation, its answers as encoding/json writes them (package
// doors/native holds the real door).
type testDoor struct{ v *api.Validator }

func (testDoor) Name() string { return "native" }

func (d testDoor) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	v := d.v
	if v == nil {
		v = &api.Validator{Models: []string{"qwen"}, DefaultModel: "qwen"}
	}
	req, body, err := v.ReadRequest(r)
	if err != nil {
		return api.Chat{}, nil, err
	}
	return req.Chat(), body, nil
}

func (testDoor) WriteError(w http.ResponseWriter, err *api.Error) { err.Write(w) }

func (testDoor) WriteAnswer(w http.ResponseWriter, a *Answer) {
	api.WriteJSON(w, http.StatusOK, testResponse(a))
}

func (testDoor) AppendDelta(b []byte, _ *Answer, d *protocols.Delta) []byte {
	if d.Text == "" {
		return b
	}
	return appendEvent(b, "", mustJSON(api.StreamDelta{Content: d.Text}))
}

func (testDoor) AppendEnd(b []byte, a *Answer) []byte {
	return appendEvent(b, "done", mustJSON(testResponse(a)))
}

func (testDoor) AppendStreamError(b []byte, _ *Answer, err *api.Error) []byte {
	return appendEvent(b, "error", mustJSON(map[string]any{"detail": err.Detail}))
}

func testResponse(a *Answer) api.InferenceResponse {
	resp := api.InferenceResponse{Content: a.Content, ModelType: a.Model, Usage: a.Usage,
		ProcessingTime: a.Processing.Seconds(), InferenceTime: a.Inference.Seconds(), MessageCount: a.MessageCount}
	if !a.UsageKnown {
		resp.UsageReported = api.UsageNotReported()
	}
	return resp
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// appendEvent appends "event: name\ndata: payload\n\n" (no event line when
// name is empty). payload must be single-line JSON.
func appendEvent(buf []byte, name string, payload []byte) []byte {
	if name != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, name...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, payload...)
	return append(buf, '\n', '\n')
}
