// Package reserve counts what an engine will read and generate for a
// request body carried through to it: the prompt it will build from every
// text-bearing member, the prompts of a batch, the generations asked for
// and the reply cap under every name the engine honours. The admission
// reserves that against the tenants' token limits and budgets before the
// request runs, so that no body can spend more than it reserved.
//
// The count reads the members' byte spans as the door recorded them; it
// decodes nothing it only counts. Where it cannot know the tokens (no
// tokenizer is at hand) it estimates high: about 3 bytes a token over the
// members' JSON, escapes and punctuation included.
package reserve

import (
	"math"
	"slices"
	"strconv"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/wire"
)

// Fixed token costs of media parts: an engine turns an image into tokens
// by its resolution, which the gateway does not decode. These are high
// for the usual vision models (LLaVA 576 to 2,880 an image, Claude about
// 1,600 a megapixel, Qwen2-VL up to its max_pixels); a part whose bytes
// estimate higher (an image inline in base64) counts its bytes instead.
const (
	ImageTokens = 2048
	AudioTokens = 2048
	VideoTokens = 16384
)

// MaxGenerations bounds the generations a count reports, whatever n says:
// far above any cap, low enough that prompts × generations × reply cap
// cannot overflow.
const MaxGenerations = 1 << 20

// Count is what a request asks of the engine.
type Count struct {
	// Bytes are the text-bearing members' bytes, every prompt's; a token
	// id counts 3 (one token at the estimate's rate).
	Bytes int
	// Messages are the messages (or prompts) the prompt is made of, for
	// the per-message overhead of the estimate.
	Messages int
	// Tokens are counted directly: what media parts cost beyond their
	// bytes' estimate.
	Tokens int
	// Prompts is the number of prompts (a batch's), at least 1.
	Prompts int
	// Generations is the most of n and best_of, at least 1;
	// GenerationsMember names the member that asked for them ("" for 1).
	Generations       int
	GenerationsMember string
	// ReplyCap is the smallest reply cap given under any name the engine
	// honours for the format; 0 when none is given.
	ReplyCap int
	// Largest names the member that weighs most in the prompt, for an
	// error about the prompt's size.
	Largest string
}

// PromptTokens is the estimate of every prompt's tokens together.
func (c *Count) PromptTokens() int {
	return limits.EstimateTokens(c.Bytes, c.Messages) + c.Tokens
}

// capNames are the members that cap a reply, by format: every name an
// engine honours for it (vLLM takes max_tokens beside max_output_tokens on
// Responses, and max_completion_tokens beside max_tokens on Messages). The
// last is the one the gateway adds to a body that gives none.
var capNames = map[api.Format][]string{
	api.FormatOpenAIChat:        {"max_completion_tokens", "max_tokens"},
	api.FormatOpenAICompletions: {"max_tokens"},
	api.FormatOpenAIResponses:   {"max_tokens", "max_output_tokens"},
	api.FormatAnthropicMessages: {"max_completion_tokens", "max_tokens"},
}

// CapNames are the members that cap a reply in format f; the last is the
// one to add to a body that gives none. nil for a format without replies.
func CapNames(f api.Format) []string { return capNames[f] }

// Of counts the body w carries. A member that is not text (a number, a
// boolean, null) costs nothing; every other member costs its bytes, but
// for the prompts of a batch and token ids (counted per prompt, per id)
// and media parts (at least their fixed cost).
func Of(w *api.Wire) Count {
	c := Count{Prompts: 1, Generations: 1}
	names := capNames[w.Format]
	largest := 0
	for _, m := range w.Members {
		v := m.Value
		if g, member, ok := generations(m, c.Generations, c.GenerationsMember); ok {
			c.Generations, c.GenerationsMember = g, member
			continue
		}
		if slices.Contains(names, m.Name) {
			if n, ok := Number(v); ok && n > 0 && (c.ReplyCap == 0 || n < c.ReplyCap) {
				c.ReplyCap = n
			}
			continue
		}
		switch v.Kind() {
		case wire.String, wire.Object, wire.Array:
		default:
			continue
		}
		before := c.Bytes + 3*c.Tokens
		switch {
		case m.Name == "messages" || m.Name == "system" || (m.Name == "input" && w.Format == api.FormatOpenAIResponses):
			c.Bytes += len(v.Raw)
			conv := w.ConvRead && m.Name == convMember(w.Format) // the door counted it
			switch {
			case m.Name == "system" && w.Format == api.FormatAnthropicMessages:
				// Text blocks only: the door refuses any other.
			case conv:
				c.Tokens += w.ConvMedia
			default:
				c.Tokens += media(v, 0)
			}
			switch {
			case m.Name == "messages" && w.Messages != nil:
				c.Messages += len(w.Messages) // the door counted them
			case conv:
				c.Messages += w.ConvItems
			case m.Name == "messages" || m.Name == "input":
				c.Messages += items(v)
			default:
				c.Messages++
			}
		case (m.Name == "prompt" && w.Format == api.FormatOpenAICompletions) ||
			(m.Name == "input" && w.Format == api.FormatOpenAIEmbeddings):
			prompts := max(c.batch(v, w.Prompts), 1)
			c.Prompts = prompts
			c.Messages += prompts
		default:
			c.Bytes += len(v.Raw)
		}
		if w := c.Bytes + 3*c.Tokens - before; w > largest {
			largest, c.Largest = w, m.Name
		}
	}
	return c
}

// Generations is the most of n and best_of w asks for (at least 1), and
// the member that asks it: what a cap on generations needs, without the
// rest of the count.
func Generations(w *api.Wire) (int, string) {
	g, member := 1, ""
	for _, m := range w.Members {
		g, member, _ = generations(m, g, member)
	}
	return g, member
}

// generations folds member m into the generations asked so far (g, by
// member) when it is n or best_of, the larger standing; ok reports
// whether it was.
func generations(m wire.Member, g int, member string) (int, string, bool) {
	if m.Name != "n" && m.Name != "best_of" {
		return g, member, false
	}
	if n, ok := Number(m.Value); ok && n > g {
		g, member = min(n, MaxGenerations), m.Name
	}
	return g, member, true
}

// items is the number of elements of an array (1 for any other value): a
// conversation's messages, for the estimate's overhead per message.
func items(v wire.Value) int {
	if v.Kind() != wire.Array {
		return 1
	}
	n := 0
	_ = v.Elements(func(int, wire.Value) bool { n++; return true })
	return n
}

// batch counts a completion's prompt or an embedding's input: a string,
// strings, token ids or arrays of them. Each string is a prompt of its
// bytes; token ids are one prompt (or one an inner array), each id a
// token, or its bytes when they estimate higher. It returns the prompts.
// elems, when not nil, are v's elements as the door read them (the
// request's api.Wire.Prompts): the array is not read again.
func (c *Count) batch(v wire.Value, elems []wire.Value) int {
	if v.Kind() != wire.Array {
		c.Bytes += len(v.Raw)
		return 1
	}
	prompts, ids, idBytes := 0, 0, 0
	count := func(_ int, e wire.Value) bool {
		switch e.Kind() {
		case wire.Number:
			ids++
			idBytes += len(e.Raw) + 1
		case wire.Array:
			prompts++
			n := 0
			_ = e.Elements(func(int, wire.Value) bool { n++; return true })
			c.Bytes += max(3*n, len(e.Raw))
		default:
			prompts++
			c.Bytes += len(e.Raw)
		}
		return true
	}
	if elems != nil {
		for i, e := range elems {
			count(i, e)
		}
	} else {
		_ = v.Elements(count)
	}
	if ids > 0 {
		prompts++
		c.Bytes += max(3*ids, idBytes)
	}
	return prompts
}

// Number reads a count the engine would take: a JSON number, or a
// string of one (a lax validator coerces it); a fraction is rounded up.
// ok is false for anything else, or below 0. A count beyond
// MaxGenerations·4096 reads as that bound: high, never wrapped.
func Number(v wire.Value) (int, bool) {
	raw := v.Raw
	switch v.Kind() {
	case wire.String:
		if len(raw) < 2 {
			return 0, false
		}
		raw = raw[1 : len(raw)-1]
	case wire.Number:
	default:
		return 0, false
	}
	const bound = MaxGenerations << 12
	n := 0
	for _, b := range raw {
		if b < '0' || b > '9' {
			// A sign, a fraction, an exponent: rare, read as a float.
			f, err := strconv.ParseFloat(string(raw), 64)
			if err != nil || !(f >= 0) {
				return 0, false
			}
			return int(min(math.Ceil(f), bound)), true
		}
		if n < bound {
			n = n*10 + int(b-'0')
		}
	}
	return min(n, bound), len(raw) > 0
}

// convMember is the member a door reads as the conversation in format f.
func convMember(f api.Format) string {
	if f == api.FormatOpenAIResponses {
		return "input"
	}
	return "messages"
}
