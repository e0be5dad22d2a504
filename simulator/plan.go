package simulator

import "fmt"

// Finish reasons of a reply.
const (
	finishStop   = "stop"
	finishLength = "length"
)

// plan is what the simulator will answer to one valid chat request.
type plan struct {
	Tokens       []string
	FinishReason string
	PromptTokens int
}

// planReply applies the reply length, max_tokens and the context length
// of cfg to c, with vLLM's context-length errors.
func planReply(cfg Config, c *chat) (plan, *apiError) {
	p := plan{PromptTokens: promptTokens(c.Messages), FinishReason: finishStop}
	limit := c.maxTokens()
	if ml := cfg.MaxModelLen; ml > 0 {
		if p.PromptTokens >= ml {
			return plan{}, badRequest(fmt.Sprintf(
				"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
				ml, p.PromptTokens))
		}
		if limit != nil && p.PromptTokens+*limit > ml {
			return plan{}, badRequest(fmt.Sprintf(
				"'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
				*limit, ml, p.PromptTokens, *limit, ml, p.PromptTokens))
		}
	}
	n := cfg.Tokens
	if limit != nil && *limit < n {
		n, p.FinishReason = *limit, finishLength
	}
	if ml := cfg.MaxModelLen; ml > 0 && limit == nil && p.PromptTokens+n > ml {
		// vLLM defaults max_tokens to what is left of the context.
		n, p.FinishReason = ml-p.PromptTokens, finishLength
	}
	p.Tokens = replyTokens(cfg.Seed, c.Messages, n)
	return p, nil
}
