package simulator

import (
	"strings"

	"github.com/llmedge/llmedge/api"
)

// Continuing an answer: a request whose last message is the assistant's,
// with vLLM's "continue_final_message": true (and "add_generation_prompt":
// false, which vLLM requires with it) — or any such request to the
// llama.cpp and Ollama dialects, which continue a trailing assistant
// message as it is — gets the rest of the answer that message begins,
// not a new answer. The reply is what the simulator would have answered
// the conversation before that message, less the tokens the message
// already holds: a gateway that splices it after them gets, token for
// token, the answer an unbroken stream would have brought. A message the
// simulator would not have written (another seed) goes on with new words.
//
// The prompt of a continuation counts the open assistant turn by its
// words alone (no template tokens), so its prompt_tokens are the
// original prompt's plus the tokens continued from, as an engine's are.

// readContinue reads vLLM's two template options, with vLLM's checks.
func (c *chat) readContinue(cont, genPrompt *bool) {
	if cont == nil || !*cont {
		return
	}
	if genPrompt == nil || *genPrompt {
		c.fail(badRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True."))
		return
	}
	if c.LastRole != api.RoleAssistant {
		c.fail(badRequest("continue_final_message is set but the final message is not the assistant's."))
		return
	}
	c.ContinueFinal = true
}

// continued reports whether the reply continues the last message, and
// returns the conversation before it and its text.
func (c *chat) continued(d *dialect) ([]api.Message, string, bool) {
	n := len(c.Messages)
	if n == 0 || c.Groups != nil || c.LastRole != api.RoleAssistant || !c.ContinueFinal && !d.continuesTrailing {
		return nil, "", false
	}
	return c.Messages[:n-1], c.Messages[n-1].Content, true
}

// continueFrom is choice j of the answer to from that prefix begins, of
// at most room tokens (-1: any): the rest of the reply generate would
// have made, when prefix is its start at a token's end.
func (c *chat) continueFrom(cfg Config, from []api.Message, prefix string, j, room int) reply {
	seed := choiceSeed(cfg.Seed, j)
	full := replyTokens(seed, from, cfg.Tokens)
	k, at := 0, 0
	for k < len(full) && at < len(prefix) && strings.HasPrefix(prefix[at:], full[k]) {
		at += len(full[k])
		k++
	}
	var pieces []string
	if at == len(prefix) {
		pieces = full[k:]
	} else {
		pieces = replyTokens(seed, c.Messages, max(cfg.Tokens-len(strings.Fields(prefix)), 0))
		if len(pieces) > 0 {
			pieces[0] = " " + pieces[0]
		}
	}
	r := reply{Pieces: pieces, Finish: finishStop}
	r.cap(room)
	if p, stop, ok := applyStops(r.Pieces, c.Stops); ok {
		r.Pieces, r.Finish, r.StopReason = p, finishStop, stop
	}
	return r
}

// faultAt is where a fault set to strike after n tokens (DropAfter,
// ErrorAfter; 0: never) strikes in p's reply: after n tokens of the
// answer, plus the answer's spread (FaultSpread), counted in the tokens p
// sends, which a continuation begins after p.Continued of them; 0 when
// that point is behind p's start.
func faultAt(cfg Config, p plan, n int) int {
	if n <= 0 {
		return 0
	}
	if cfg.FaultSpread > 0 {
		n += int(splitmix64(messagesHash(p.Conversation)) % uint64(cfg.FaultSpread))
	}
	if n -= p.Continued; n <= 0 {
		return 0
	}
	return n
}
