package simulator

import (
	"math/rand/v2"
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

// With ContinueCompletions, a text completion continues as a real
// engine's does, with no member to ask for it: a gateway continuing one appends the text so far to the
// prompt, and the engine goes on from there. The simulator, whose answer
// is a function of its prompt, finds the prompt the text was the answer
// to: a prompt that ends with the beginning of the answer to the prompt
// before that beginning (at a token's end) gets the rest of that answer,
// and counts that beginning by its words, as a chat continuation does.

// FNV-1a, 64 bits, as messagesHash runs it (hash/fnv's constants).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// completionContinued reports whether c, a text completion of one prompt
// and one choice, continues the answer to a shorter prompt, and returns
// that prompt (as the conversation it is) and the answer's beginning.
func (c *chat) completionContinued(cfg Config) ([]api.Message, string, bool) {
	if !cfg.ContinueCompletions || !c.Raw || len(c.Groups) != 1 || len(c.Groups[0]) != 1 || c.N > 1 || c.Echo || c.Format != nil || len(c.Tools) > 0 {
		return nil, "", false
	}
	prompt := c.Groups[0][0].Content
	// The hash of {Content: prompt[:i]} for every i at once: the role's
	// (empty) and its terminator, then the bytes.
	h := uint64(fnvOffset64)
	h = (h ^ 0) * fnvPrime64
	for i := 0; i < len(prompt)-1; i++ {
		h = (h ^ uint64(prompt[i])) * fnvPrime64
		from := prompt[:i+1]
		rest := prompt[i+1:]
		if n, ok := answerPrefix(cfg, (h^0)*fnvPrime64, rest); ok && n <= cfg.Tokens {
			return []api.Message{{Content: from}}, rest, true
		}
	}
	return nil, "", false
}

// answerPrefix reports whether text is the beginning of the answer whose
// messages hash to hash, ending at a token's end, and of how many tokens.
func answerPrefix(cfg Config, hash uint64, text string) (int, bool) {
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), hash))
	at, n := 0, 0
	for at < len(text) && n < cfg.Tokens {
		w := words[rng.IntN(len(words))]
		if n > 0 {
			w = " " + w
		}
		if !strings.HasPrefix(text[at:], w) {
			return 0, false
		}
		at += len(w)
		n++
	}
	return n, at == len(text) && n > 0
}
