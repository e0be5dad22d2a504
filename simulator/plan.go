package simulator

import "github.com/llmedge/llmedge/api"

// Finish reasons of a reply.
const (
	finishStop   = "stop"
	finishLength = "length"
)

// plan is what the simulator will answer to one valid chat request.
type plan struct {
	Tokens       []string
	FinishReason string
	// Prompt is the messages the engine prefills, less Cut: the request's,
	// unless a truncating engine (Ollama) dropped some to fit its context.
	Prompt       []api.Message
	Cut          promptCut
	PromptTokens int
	// seq is the request's passage through the engine; handleChat sets it
	// once the request is to be answered.
	seq *sequence
}

// planReply applies the reply length, max_tokens and the context length
// of cfg to c, with the dialect's context-length errors or truncation.
func planReply(cfg Config, c *chat) (plan, *apiError) {
	d := dialectOf(cfg)
	p := plan{Prompt: c.Messages, PromptTokens: promptTokens(c.Messages), FinishReason: finishStop}
	limit := c.maxTokens()
	ml := cfg.MaxModelLen
	switch {
	case ml <= 0:
	case d.truncates:
		// Ollama refuses nothing for its length unless told not to
		// truncate: it cuts a prompt longer than num_ctx to fit, and
		// shifts its context when the reply fills it, so num_predict
		// beyond what is left is no error either.
		if p.PromptTokens > ml {
			if c.NoTruncate {
				return plan{}, d.contextError(ml, p.PromptTokens, limit)
			}
			p.Prompt, p.Cut, p.PromptTokens = truncateOllama(c.Messages, ml)
		}
	case p.PromptTokens >= ml || limit != nil && p.PromptTokens+*limit > ml:
		return plan{}, d.contextError(ml, p.PromptTokens, limit)
	}
	n := cfg.Tokens
	if limit != nil && *limit < n {
		n, p.FinishReason = *limit, finishLength
	}
	if ml > 0 && !d.truncates && limit == nil && p.PromptTokens+n > ml {
		// vLLM defaults max_tokens to what is left of the context.
		n, p.FinishReason = ml-p.PromptTokens, finishLength
	}
	p.Tokens = replyTokens(cfg.Seed, c.Messages, n)
	return p, nil
}

// truncateOllama is the prompt Ollama (v0.17) runs for msgs, longer than
// its context of ml tokens, with its token count (ml at most). First, as
// its chat handler does, it drops whole messages from the front, keeping
// the system messages among them, until the rest fits or only the last
// message is left; then, if that is still too long, its runner keeps the
// first num_keep tokens and the last ones, ml in all. So a long
// conversation loses its oldest turns, and a single long message its
// middle; either way the answer is a 200.
func truncateOllama(msgs []api.Message, ml int) ([]api.Message, promptCut, int) {
	counts := make([]int, len(msgs))
	rest := 0
	for i := range msgs {
		counts[i] = promptTokens(msgs[i : i+1])
		rest += counts[i]
	}
	// Try msgs[start:] after the system messages before start.
	start, system := 0, 0
	for start < len(msgs)-1 && system+rest > ml {
		if msgs[start].Role == "system" {
			system += counts[start]
		}
		rest -= counts[start]
		start++
	}
	kept := msgs
	if start > 0 {
		kept = make([]api.Message, 0, len(msgs)-start+1)
		for _, m := range msgs[:start] {
			if m.Role == "system" {
				kept = append(kept, m)
			}
		}
		kept = append(kept, msgs[start:]...)
	}
	n := system + rest
	if n <= ml {
		return kept, promptCut{}, n
	}
	// At least one token must go, as in Ollama (num_keep < num_ctx).
	keep := min(ollamaNumKeep, ml-1)
	return kept, promptCut{from: keep, n: n - ml}, ml
}
