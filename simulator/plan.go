package simulator

import (
	"math/rand/v2"
	"strings"

	"github.com/llmedge/llmedge/api"
)

// Finish reasons of a reply.
const (
	finishStop      = "stop"
	finishLength    = "length"
	finishToolCalls = "tool_calls"
)

// plan is what the simulator will answer to one valid chat request.
type plan struct {
	// Tokens and FinishReason are choice 0's (Choices[0].Pieces and
	// .Finish), which is all the engines' own APIs answer.
	Tokens       []string
	FinishReason string
	// Choices are the answer's choices, n per prompt.
	Choices []reply
	// Prompt is the messages the engine prefills, less Cut: the request's,
	// unless a truncating engine (Ollama) dropped some to fit its context.
	Prompt       []api.Message
	Cut          promptCut
	PromptTokens int
	// Continued is the tokens of the assistant message the reply
	// continues (continue.go); Conversation the messages whose answer it
	// is (the request's, less that message), for the faults' spread.
	Continued    int
	Conversation []api.Message
	// seq is the request's passage through the engine; handleChat sets it
	// once the request is to be answered.
	seq *sequence
}

// reply is one choice of an answer.
type reply struct {
	// Pieces are the tokens of the choice, streamed one per inter-token
	// latency: words of text, fragments of JSON, or fragments of a tool
	// call's arguments.
	Pieces []string
	// Finish is stop, length or tool_calls; StopReason the stop string
	// that ended the text, if one did.
	Finish     string
	StopReason string
	// Call, when set, makes the choice a call of a function whose
	// arguments are the pieces.
	Call *toolCall
	// Reasoning are the tokens of the choice's reasoning, before its
	// pieces (reasoning.go).
	Reasoning []string
}

// toolCall is a function call an answer makes.
type toolCall struct {
	ID, Name, Arguments string
}

// text is the choice's text (or a call's arguments).
func (r reply) text() string { return strings.Join(r.Pieces, "") }

// completionTokens is the tokens of all choices.
func (p plan) completionTokens() int {
	if p.Choices == nil {
		return len(p.Tokens)
	}
	n := 0
	for _, r := range p.Choices {
		n += r.tokens()
	}
	return n
}

// steps is the inter-token steps the answer takes: the longest choice's
// tokens, the choices decoding side by side.
func (p plan) steps() int {
	if p.Choices == nil {
		return len(p.Tokens)
	}
	n := 0
	for _, r := range p.Choices {
		n = max(n, r.tokens())
	}
	return n
}

// planReply applies the reply length, max_tokens and the context length
// of cfg to c, with the dialect's context-length errors or truncation, and
// generates each choice: text, JSON (response_format) or a tool call.
func planReply(cfg Config, c *chat) (plan, *apiError) {
	d := dialectOf(cfg)
	prompt := c.enginePrompt()
	p := plan{Prompt: prompt, PromptTokens: promptTokens(prompt), FinishReason: finishStop}
	from, prefix, cont := c.continued(d)
	if !cont {
		from, prefix, cont = c.completionContinued(cfg)
	}
	p.Conversation = c.Messages
	if cont {
		// The assistant's turn is left open: its words, no template tokens.
		p.Continued = len(strings.Fields(prefix))
		p.PromptTokens = promptTokens(from) + p.Continued
		p.Conversation = from
	}
	limit := c.maxTokens()
	ml := cfg.MaxModelLen
	switch {
	case ml <= 0:
	case c.Groups != nil:
		// A batch of prompts is as many requests to vLLM, each checked.
		for _, g := range c.Groups {
			if n := promptTokens(g); n >= ml || limit != nil && n+*limit > ml {
				return plan{}, d.contextError(ml, n, limit)
			}
		}
	case d.truncates:
		// Ollama refuses nothing for its length unless told not to
		// truncate: it cuts a prompt longer than num_ctx to fit, and
		// shifts its context when the reply fills it, so num_predict
		// beyond what is left is no error either.
		if p.PromptTokens > ml {
			if c.NoTruncate {
				return plan{}, d.contextError(ml, p.PromptTokens, limit)
			}
			p.Prompt, p.Cut, p.PromptTokens = truncateOllama(prompt, ml)
		}
	case p.PromptTokens >= ml || limit != nil && p.PromptTokens+*limit > ml:
		return plan{}, d.contextError(ml, p.PromptTokens, limit)
	}
	n := max(c.N, 1)
	p.Choices = make([]reply, c.choices())
	for i := range p.Choices {
		msgs, pt := c.Messages, p.PromptTokens
		if c.Groups != nil {
			msgs = c.Groups[i/n]
			pt = promptTokens(msgs)
		}
		// How many tokens the choice may take: max_tokens, or (vLLM's
		// default) what is left of the context; -1 for no bound.
		room := -1
		switch {
		case limit != nil:
			room = *limit
		case ml > 0 && !d.truncates:
			room = ml - pt
		}
		if cont {
			p.Choices[i] = c.continueFrom(cfg, from, prefix, i%n, room)
			continue
		}
		p.Choices[i] = c.generateReasoned(cfg, d, msgs, i%n, room)
	}
	p.Tokens, p.FinishReason = p.Choices[0].Pieces, p.Choices[0].Finish
	return p, nil
}

// generate is choice j of the answer to msgs, of at most room tokens (-1:
// any): a call of the function toolToCall picks, JSON when c asks for it,
// or text of cfg.Tokens words, ended early by a stop string.
func (c *chat) generate(cfg Config, msgs []api.Message, j, room int) reply {
	seed := choiceSeed(cfg.Seed, j)
	if t := c.toolToCall(cfg.ToolFile); t != nil {
		rng := rand.New(rand.NewPCG(uint64(seed), messagesHash(msgs)^hashString(seedWord, t.Name)))
		r := reply{Pieces: jsonPieces(callArguments(t, cfg.ToolFile, rng)), Finish: finishToolCalls}
		r.cap(room)
		r.Call = &toolCall{ID: toolCallID(), Name: t.Name, Arguments: r.text()}
		return r
	}
	var r reply
	if c.Format != nil {
		rng := rand.New(rand.NewPCG(uint64(seed), messagesHash(msgs)))
		r = reply{Pieces: jsonPieces(generateFormat(c.Format, rng, cfg.Tokens)), Finish: finishStop}
		r.cap(room)
	} else {
		n := cfg.Tokens
		r.Finish = finishStop
		if room >= 0 && room < n {
			n, r.Finish = room, finishLength
		}
		r.Pieces = replyTokens(seed, msgs, n)
	}
	if pieces, stop, ok := applyStops(r.Pieces, c.Stops); ok {
		r.Pieces, r.Finish, r.StopReason = pieces, finishStop, stop
	}
	return r
}

// cap cuts r to room tokens (-1: any), finishing it by length if that
// cut it.
func (r *reply) cap(room int) {
	if room >= 0 && len(r.Pieces) > room {
		r.Pieces, r.Finish = r.Pieces[:room], finishLength
	}
}

// choiceSeed is the seed of choice j: the configured one for the first
// choice, so that n = 1 answers as before, and others derived from it.
func choiceSeed(seed int64, j int) int64 {
	if j == 0 {
		return seed
	}
	return seed ^ int64(splitmix64(uint64(j)))
}

// applyStops ends pieces before the first occurrence of any of stops, as
// an engine stops generating there and leaves the stop string out; the
// piece it starts in is cut (and dropped when nothing of it is left). It
// reports the stop string found, if any.
func applyStops(pieces, stops []string) ([]string, string, bool) {
	if len(stops) == 0 {
		return pieces, "", false
	}
	text := strings.Join(pieces, "")
	at, stop := -1, ""
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (at < 0 || i < at) {
			at, stop = i, s
		}
	}
	if at < 0 {
		return pieces, "", false
	}
	out := make([]string, 0, len(pieces))
	pos := 0
	for _, pc := range pieces {
		if pos+len(pc) <= at {
			out = append(out, pc)
			pos += len(pc)
			continue
		}
		if at > pos {
			out = append(out, pc[:at-pos])
		}
		break
	}
	return out, stop, true
}

// toolCallID returns a fresh "chatcmpl-tool-<32 hex>" id, as vLLM makes
// them.
func toolCallID() string { return "chatcmpl-tool-" + randomHex() }

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
