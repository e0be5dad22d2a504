package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// What OpenAI-compatible replicas take, carried through by the gateway
// (issue 20): tools, structured outputs, several choices, logprobs,
// embeddings and completions, through the SDK's own types and helpers.

var weatherParams = openai.FunctionParameters{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string"},
		"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
	},
	"required":             []string{"city", "days"},
	"additionalProperties": false,
}

// weatherArgs are get_weather's arguments; decodeStrict checks them
// against weatherParams.
type weatherArgs struct {
	City string `json:"city"`
	Days *int   `json:"days"`
}

func (a weatherArgs) valid() bool { return a.Days != nil && *a.Days >= 1 && *a.Days <= 7 }

// decodeStrict decodes JSON into v, refusing members v does not have.
func decodeStrict(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
}

func weatherTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("The weather in a city for some days"), Parameters: weatherParams,
	})}
}

func askWeather() []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris this week?")}
}

// TestToolRoundTrip: the replica calls the tool; the SDK's own message
// and the tool's result go back, and the replica answers in text.
func TestToolRoundTrip(t *testing.T) {
	full, _ := clients(t)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "qwen", Messages: askWeather(), Tools: weatherTools()}
	first, err := full.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ch := first.Choices[0]
	if first.Model != "qwen" || ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("no tool call: %s", first.RawJSON())
	}
	call := ch.Message.ToolCalls[0]
	var args weatherArgs
	decodeStrict(t, call.Function.Arguments, &args)
	if call.Type != "function" || call.ID == "" || call.Function.Name != "get_weather" || !args.valid() {
		t.Fatalf("call %s", call.RawJSON())
	}

	params.Messages = append(params.Messages, ch.Message.ToParam(), openai.ToolMessage(`{"temp":21,"sky":"clear"}`, call.ID))
	second, err := full.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Choices[0].FinishReason != "stop" || second.Choices[0].Message.Content == "" || len(second.Choices[0].Message.ToolCalls) != 0 ||
		second.Usage.PromptTokens <= first.Usage.PromptTokens {
		t.Fatalf("after the tool's result: %s", second.RawJSON())
	}
}

// TestStreamedToolCall: the SDK's accumulator builds the call from the
// streamed deltas, the same call the replica makes whole.
func TestStreamedToolCall(t *testing.T) {
	full, _ := clients(t)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "qwen", Messages: askWeather(), Tools: weatherTools()}
	whole, err := full.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	stream := full.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	var finished []openai.FinishedChatCompletionToolCall
	deltas := 0
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Model != "qwen" {
			t.Fatalf("chunk %s", chunk.RawJSON())
		}
		if len(chunk.Choices) > 0 && len(chunk.Choices[0].Delta.ToolCalls) > 0 {
			deltas++
		}
		acc.AddChunk(chunk)
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := whole.Choices[0].Message.ToolCalls[0].Function
	if deltas < 3 || len(finished) != 1 || finished[0].Name != "get_weather" || finished[0].Arguments != want.Arguments ||
		len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 ||
		acc.Choices[0].Message.ToolCalls[0].Function.Arguments != want.Arguments {
		t.Fatalf("%d deltas, finished %+v, accumulated %+v; the whole call: %+v", deltas, finished, acc.ChatCompletion, want)
	}
}

// TestStructuredOutput: a json_schema response_format; the answer
// decodes into the schema's type and keeps to its bounds.
func TestStructuredOutput(t *testing.T) {
	full, _ := clients(t)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"temp":  map[string]any{"type": "number", "minimum": -40, "maximum": 50},
			"sky":   map[string]any{"type": "string", "enum": []string{"clear", "cloudy", "rain"}},
			"hours": map[string]any{"type": "array", "items": map[string]any{"type": "integer", "minimum": 0, "maximum": 23}},
		},
		"required":             []string{"temp", "sky", "hours"},
		"additionalProperties": false,
	}
	c, err := full.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "qwen", Messages: askWeather(),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "forecast", Strict: openai.Bool(true), Schema: schema},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Temp  *float64 `json:"temp"`
		Sky   string   `json:"sky"`
		Hours []int    `json:"hours"`
	}
	decodeStrict(t, c.Choices[0].Message.Content, &f)
	if f.Temp == nil || *f.Temp < -40 || *f.Temp > 50 || !slices.Contains([]string{"clear", "cloudy", "rain"}, f.Sky) || f.Hours == nil {
		t.Fatalf("forecast %s", c.Choices[0].Message.Content)
	}
	for _, h := range f.Hours {
		if h < 0 || h > 23 {
			t.Fatalf("hour %d in %s", h, c.Choices[0].Message.Content)
		}
	}
}

// TestChoicesAndLogprobs: n, logprobs and the members the SDK has no
// field for (set with option.WithJSONSet) reach the replica.
func TestChoicesAndLogprobs(t *testing.T) {
	full, _ := clients(t)
	c, err := full.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "qwen", Messages: askWeather(), N: openai.Int(2), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
		Seed: openai.Int(7), FrequencyPenalty: openai.Float(0.5), LogitBias: map[string]int64{"50256": -100},
		ReasoningEffort: shared.ReasoningEffortLow,
	}, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 2 || c.Choices[0].Message.Content == c.Choices[1].Message.Content || c.Usage.CompletionTokens != 16 {
		t.Fatalf("%s", c.RawJSON())
	}
	for _, ch := range c.Choices {
		if len(ch.Logprobs.Content) != 8 || len(ch.Logprobs.Content[0].TopLogprobs) != 2 {
			t.Fatalf("logprobs %s", ch.Logprobs.RawJSON())
		}
	}
}

// TestEmbeddings: vectors as floats and as base64, the same.
func TestEmbeddings(t *testing.T) {
	full, _ := clients(t)
	ctx := context.Background()
	in := openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first text", "second text"}}
	e, err := full.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "qwen", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if e.Model != "qwen" || len(e.Data) != 2 || e.Data[1].Index != 1 || e.Usage.PromptTokens <= 0 {
		t.Fatalf("%s", e.RawJSON())
	}
	norm := 0.0
	for _, x := range e.Data[0].Embedding {
		norm += x * x
	}
	if math.Abs(math.Sqrt(norm)-1) > 1e-4 {
		t.Fatalf("not a unit vector: %v", e.Data[0].Embedding)
	}
	b, err := full.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "qwen", Input: in,
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64, Dimensions: openai.Int(4)})
	if err != nil {
		t.Fatal(err)
	}
	// The SDK leaves a base64 vector as written: a string of 4 float32s.
	var raw struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(b.RawJSON()), &raw); err != nil || len(raw.Data) != 2 || len(raw.Data[0].Embedding) != 24 {
		t.Fatalf("%v %s", err, b.RawJSON())
	}
}

// TestCompletions: a completion whole and streamed, the same text.
func TestCompletions(t *testing.T) {
	full, _ := clients(t)
	ctx := context.Background()
	params := openai.CompletionNewParams{Model: "qwen",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(5)}
	c, err := full.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if c.Object != "text_completion" || c.Model != "qwen" || len(c.Choices) != 1 || c.Choices[0].Text == "" ||
		c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 5 {
		t.Fatalf("%s", c.RawJSON())
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := full.Completions.NewStreaming(ctx, params)
	text, usage := "", int64(0)
	for stream.Next() {
		chunk := stream.Current()
		for _, ch := range chunk.Choices {
			text += ch.Text
		}
		usage += chunk.Usage.CompletionTokens
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != c.Choices[0].Text || usage != 5 {
		t.Fatalf("streamed %q (usage %d), whole %q", text, usage, c.Choices[0].Text)
	}
}
