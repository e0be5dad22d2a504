package simulator

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
	// seq is the request's passage through the engine; handleChat sets it
	// once the request is to be answered.
	seq *sequence
}

// planReply applies the reply length, max_tokens and the context length
// of cfg to c, with the dialect's context-length errors.
func planReply(cfg Config, c *chat) (plan, *apiError) {
	p := plan{PromptTokens: promptTokens(c.Messages), FinishReason: finishStop}
	limit := c.maxTokens()
	if ml := cfg.MaxModelLen; ml > 0 && (p.PromptTokens >= ml || limit != nil && p.PromptTokens+*limit > ml) {
		return plan{}, dialectOf(cfg).contextError(ml, p.PromptTokens, limit)
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
