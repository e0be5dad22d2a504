package openaicompat

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

// A replica's cached tokens (usage.prompt_tokens_details.cached_tokens)
// reach the gateway's usage when it reports them, and only then.
func TestUsageCachedTokens(t *testing.T) {
	cases := []struct {
		answer string
		want   api.Usage
	}{
		{`{"usage":{"prompt_tokens":98,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":96}}}`,
			api.Usage{PromptTokens: 98, CompletionTokens: 2, TotalTokens: 100, CachedTokens: 96, CachedKnown: true}},
		{`{"usage":{"prompt_tokens":98,"completion_tokens":2,"prompt_tokens_details":null}}`,
			api.Usage{PromptTokens: 98, CompletionTokens: 2, TotalTokens: 100}},
		{`{"usage":{"prompt_tokens":98,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}`,
			api.Usage{PromptTokens: 98, CompletionTokens: 2, TotalTokens: 100, CachedKnown: true}},
		{`{"usage":{"prompt_tokens":98,"prompt_tokens_details":{"cached_tokens":"many"}}}`,
			api.Usage{PromptTokens: 98}},
	}
	for _, c := range cases {
		var a wire.Answer
		if err := wire.ReadAnswer([]byte(c.answer), &a); err != nil {
			t.Fatalf("%s: %v", c.answer, err)
		}
		if got, _ := usage(a.Usage); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.answer, got, c.want)
		}
	}
}
