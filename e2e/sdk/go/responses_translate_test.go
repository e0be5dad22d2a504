package sdk

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestResponsesTranslated: the Responses API of models whose replicas do
// not serve it (the gateway translates to chat completions), through the
// SDK's client.Responses: one answer, a stream the SDK decodes event by
// event, and a two-turn function call. It runs when
// LLMEDGE_RESPONSES_MODELS names such models (TestResponsesTranslationSDK
// in e2e/responses_translate_test.go).
func TestResponsesTranslated(t *testing.T) {
	models := os.Getenv("LLMEDGE_RESPONSES_MODELS")
	if models == "" {
		t.Skip("LLMEDGE_RESPONSES_MODELS is not set")
	}
	full, _ := clients(t)
	ctx := context.Background()
	weather := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"},
	}, false)
	for _, model := range strings.Split(models, ",") {
		t.Run(model, func(t *testing.T) {
			r, err := full.Responses.New(ctx, responses.ResponseNewParams{
				Model:           model,
				Instructions:    openai.String("Be terse."),
				Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
				MaxOutputTokens: openai.Int(64),
				Store:           openai.Bool(false),
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Object != "response" || r.Model != model || r.Status != responses.ResponseStatusCompleted || r.OutputText() == "" ||
				r.Usage.OutputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
				t.Fatalf("response %s", r.RawJSON())
			}

			stream := full.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("Say hello.", responses.EasyInputMessageRoleUser),
				}},
			})
			var text strings.Builder
			var types []string
			var done responses.Response
			for stream.Next() {
				ev := stream.Current()
				if ev.SequenceNumber != int64(len(types)) {
					t.Fatalf("event %s: sequence_number %d after %d events", ev.Type, ev.SequenceNumber, len(types))
				}
				types = append(types, ev.Type)
				switch ev.Type {
				case "response.output_text.delta":
					d := ev.AsResponseOutputTextDelta()
					if d.ItemID == "" || d.OutputIndex != 0 || d.ContentIndex != 0 {
						t.Fatalf("delta %s", ev.RawJSON())
					}
					text.WriteString(d.Delta)
				case "response.completed":
					done = ev.AsResponseCompleted().Response
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if strings.Join(types[:3], " ") != "response.created response.in_progress response.output_item.added" ||
				types[len(types)-1] != "response.completed" || done.OutputText() != text.String() || text.Len() == 0 {
				t.Fatalf("events %v, text %q, done %s", types, text.String(), done.RawJSON())
			}

			// A function call, then its output: the answer is text.
			input := responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
			}
			first, err := full.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
				Tools: []responses.ToolUnionParam{weather},
			})
			if err != nil {
				t.Fatal(err)
			}
			var call *responses.ResponseFunctionToolCall
			for _, o := range first.Output {
				if o.Type == "function_call" {
					c := o.AsFunctionCall()
					call = &c
				}
			}
			var args map[string]any
			if call == nil || call.Name != "get_weather" || call.CallID == "" || json.Unmarshal([]byte(call.Arguments), &args) != nil {
				t.Fatalf("no call of get_weather: %s", first.RawJSON())
			}
			out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"celsius":21}`)
			out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
			input = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), out)
			second, err := full.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
				Tools: []responses.ToolUnionParam{weather},
			})
			if err != nil {
				t.Fatal(err)
			}
			if second.Status != responses.ResponseStatusCompleted || second.OutputText() == "" {
				t.Fatalf("second turn %s", second.RawJSON())
			}
			for _, o := range second.Output {
				if o.Type == "function_call" {
					t.Fatalf("called again: %s", second.RawJSON())
				}
			}
		})
	}
}
