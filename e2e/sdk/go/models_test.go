package sdk

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestAlias: a model asked for by an alias (issue 24), through the SDK's
// own types: the answer, every chunk of a stream and the embeddings name
// the alias; the model list shows it to a credential that covers its
// model, and not to one that does not. e2e's TestModelAliasSDK runs it
// with LLMEDGE_ALIAS (an alias of qwen) and LLMEDGE_ALIAS_OTHER (an
// alias of a model the limited credential lacks).
func TestAlias(t *testing.T) {
	alias, other := os.Getenv("LLMEDGE_ALIAS"), os.Getenv("LLMEDGE_ALIAS_OTHER")
	if alias == "" || other == "" {
		t.Skip("LLMEDGE_ALIAS is not set: run through e2e's TestModelAliasSDK")
	}
	full, limited := clients(t)
	ctx := context.Background()

	c, err := limited.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: alias, Messages: messages()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != alias || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
		t.Fatalf("answer %+v", c)
	}

	stream := full.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: alias, Messages: messages(),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		if ch.Model != alias {
			t.Fatalf("a chunk names %q", ch.Model)
		}
		acc.AddChunk(ch)
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks == 0 || acc.Model != alias || acc.Choices[0].Message.Content == "" || acc.Usage.TotalTokens == 0 {
		t.Fatalf("%d chunks, accumulated %+v", chunks, acc.ChatCompletion)
	}

	e, err := full.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: alias,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two"}}})
	if err != nil {
		t.Fatal(err)
	}
	if e.Model != alias || len(e.Data) != 2 {
		t.Fatalf("embeddings %+v", e)
	}

	ids := func(cl openai.Client) []string {
		var out []string
		iter := cl.Models.ListAutoPaging(ctx)
		for iter.Next() {
			out = append(out, iter.Current().ID)
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := ids(full); !slices.Contains(got, alias) || !slices.Contains(got, other) {
		t.Fatalf("a full credential lists %v, without %s or %s", got, alias, other)
	}
	if got := ids(limited); !slices.Contains(got, alias) || slices.Contains(got, other) {
		t.Fatalf("a qwen-only credential lists %v", got)
	}
	if m, err := limited.Models.Get(ctx, alias); err != nil || m.ID != alias {
		t.Fatalf("%+v %v", m, err)
	}
	// The other model's alias is out of the limited credential's scope,
	// as the model is: the SDK's 403 permission error.
	_, err = limited.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: other, Messages: messages()})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Code != "model_not_allowed" {
		t.Fatalf("the other alias: %v", err)
	}
}
