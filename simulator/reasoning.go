package simulator

import (
	"encoding/json"
	"strings"

	"github.com/llmedge/llmedge/api"
)

// Reasoning, as vLLM and SGLang with a reasoning parser answer a request
// that asks the model to think (chat_template_kwargs.enable_thinking true,
// or a reasoning_effort other than "none"): the reply's reasoning comes
// first, as message.reasoning_content (non-streamed) or as chunks of
// delta.reasoning_content before the content's (streamed), and counts in
// the completion tokens and against max_tokens. A tool call comes after
// the reasoning, its name with its first fragment. Other dialects answer
// as before: their engines' reasoning is not separated from the text.

// reasoningSeed sets the reasoning's words apart from the reply's.
const reasoningSeed = 0x7265617330

// thinks reports a chat request that asks the model to think.
func thinks(kwargs json.RawMessage, effort *string) bool {
	var k struct {
		EnableThinking *bool `json:"enable_thinking"`
	}
	if !isNull(kwargs) && json.Unmarshal(kwargs, &k) == nil && k.EnableThinking != nil {
		return *k.EnableThinking
	}
	return effort != nil && *effort != "none"
}

// separatesReasoning reports an engine that answers reasoning apart from
// the text.
func (d *dialect) separatesReasoning() bool {
	return d.name == DialectVLLM || d.name == DialectSGLang
}

// reasoningLength is how many tokens a reply's reasoning takes: half its
// text's, at least one.
func reasoningLength(cfg Config) int { return max(cfg.Tokens/2, 1) }

// generateReasoned is generate, after the reasoning of a request that asks
// for it of an engine that separates it: the reasoning takes its tokens
// out of room first, as an engine's does.
func (c *chat) generateReasoned(cfg Config, d *dialect, msgs []api.Message, j, room int) reply {
	if !c.Thinking || !d.separatesReasoning() {
		return c.generate(cfg, msgs, j, room)
	}
	k := reasoningLength(cfg)
	if room >= 0 {
		k = min(k, room)
		room -= k
	}
	r := c.generate(cfg, msgs, j, room)
	r.Reasoning = replyTokens(choiceSeed(cfg.Seed, j)^reasoningSeed, msgs, k)
	return r
}

// tokens is how many tokens the choice takes: its reasoning's and its
// pieces.
func (r reply) tokens() int { return len(r.Reasoning) + len(r.Pieces) }

// step is the choice's token at step i: a piece of its reasoning
// (thinking), or of its text or call.
func (r reply) step(i int) (piece string, thinking bool) {
	if i < len(r.Reasoning) {
		return r.Reasoning[i], true
	}
	return r.Pieces[i-len(r.Reasoning)], false
}

// reasoningText is the choice's reasoning, nil when it has none.
func (r reply) reasoningText() *string {
	if len(r.Reasoning) == 0 {
		return nil
	}
	s := strings.Join(r.Reasoning, "")
	return &s
}
