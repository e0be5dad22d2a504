package openaicompat

import (
	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

// usage converts a replica's usage, reporting false when it carries no
// count at all. A missing total is the sum of the two parts when both
// are present; nothing else is made up.
func usage(u wire.Usage) (api.Usage, bool) {
	if !u.PromptTokens.Given && !u.CompletionTokens.Given && !u.TotalTokens.Given {
		return api.Usage{}, false
	}
	out := api.Usage{PromptTokens: u.PromptTokens.N, CompletionTokens: u.CompletionTokens.N,
		CachedTokens: u.CachedTokens.N, CachedKnown: u.CachedTokens.Given}
	switch {
	case u.TotalTokens.Given:
		out.TotalTokens = u.TotalTokens.N
	case u.PromptTokens.Given && u.CompletionTokens.Given:
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out, true
}
