package native

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
)

// The hand-written answer is what encoding/json makes of an
// api.InferenceResponse, and a delta of an api.StreamDelta.
func TestResponseEncoding(t *testing.T) {
	for _, a := range []gateway.Answer{
		{Content: "Hello <you> & \"them\"\n", Model: "qwen", Usage: api.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7},
			UsageKnown: true, Processing: 1234567 * time.Microsecond, Inference: 7 * time.Microsecond, MessageCount: 2},
		{Content: "", Model: "gemma", Processing: 0, Inference: 25 * time.Second, MessageCount: 1},
	} {
		resp := api.InferenceResponse{Content: a.Content, ModelType: a.Model, Usage: a.Usage,
			ProcessingTime: seconds(a.Processing), InferenceTime: seconds(a.Inference), MessageCount: a.MessageCount}
		if !a.UsageKnown {
			resp.UsageReported = api.UsageNotReported()
		}
		want, _ := json.Marshal(resp)
		if got := appendResponse(nil, &a); string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		delta, _ := json.Marshal(api.StreamDelta{Content: a.Content})
		wantDelta := "data: " + string(delta) + "\n\n"
		if a.Content == "" {
			wantDelta = "" // an event without text (a replica's opening chunk) shows nothing
		}
		if got := string((Door{}).AppendDelta(nil, &a, &protocols.Delta{Text: a.Content, Token: true})); got != wantDelta {
			t.Errorf("delta %q, want %q", got, wantDelta)
		}
	}
}
