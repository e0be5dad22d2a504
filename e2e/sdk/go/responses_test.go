package sdk

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestResponses: the Responses API through the SDK's client.Responses:
// one answer, a stream whose events the SDK decodes, and the refusal of
// what needs a response store as the SDK's error.
func TestResponses(t *testing.T) {
	full, _ := clients(t)
	ctx := context.Background()

	r, err := full.Responses.New(ctx, responses.ResponseNewParams{
		Model:           "qwen",
		Instructions:    openai.String("Be terse."),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
		MaxOutputTokens: openai.Int(64),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Object != "response" || r.Model != "qwen" || r.Status != responses.ResponseStatusCompleted || r.OutputText() == "" ||
		r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
		t.Fatalf("response %s", r.RawJSON())
	}

	stream := full.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "qwen",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Say hello.", responses.EasyInputMessageRoleUser),
		}},
	})
	var text strings.Builder
	var types []string
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.completed":
			done = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) == 0 || types[0] != "response.created" || types[len(types)-1] != "response.completed" ||
		done.Model != "qwen" || done.OutputText() != text.String() || text.Len() == 0 || done.Usage.OutputTokens == 0 {
		t.Fatalf("events %v, text %q, done %s", types, text.String(), done.RawJSON())
	}

	_, err = full.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "qwen",
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("And then?")},
		PreviousResponseID: openai.String(r.ID),
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" ||
		apiErr.Code != "unsupported_parameter" || apiErr.Type != "invalid_request_error" {
		t.Fatalf("got %v", err)
	}
}
