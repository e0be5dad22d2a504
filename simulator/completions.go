package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
)

// POST /v1/completions, the legacy text completions, as vLLM serves them:
// a prompt (a string, a list of strings, a list of token ids or a list of
// lists) is raw text without a chat template, one token per word (a token
// id counts one); each prompt gets n choices, indexed prompt·n + j. The
// reply is the chat reply's text for a one-message conversation of the
// prompt, without a role.

// defaultCompletionMaxTokens is vLLM's default max_tokens for
// /v1/completions (chat has none).
const defaultCompletionMaxTokens = 16

// completionRequest is the part of a /v1/completions request the
// simulator reads; other fields are accepted and ignored.
type completionRequest struct {
	Model          string             `json:"model"`
	Prompt         json.RawMessage    `json:"prompt"`
	MaxTokens      *int               `json:"max_tokens"`
	N              *int               `json:"n"`
	Stream         *bool              `json:"stream"`
	StreamOptions  json.RawMessage    `json:"stream_options"`
	Echo           *bool              `json:"echo"`
	Logprobs       json.RawMessage    `json:"logprobs"`
	Stop           json.RawMessage    `json:"stop"`
	Temperature    *float64           `json:"temperature"`
	TopP           *float64           `json:"top_p"`
	Seed           *int64             `json:"seed"`
	ResponseFormat json.RawMessage    `json:"response_format"`
	Suffix         *string            `json:"suffix"`
	LogitBias      map[string]float64 `json:"logit_bias"`
}

// decodeCompletions reads a /v1/completions body.
func decodeCompletions(r *http.Request, w http.ResponseWriter) (*chat, error) {
	var req completionRequest
	if err := readBody(r, w, &req); err != nil {
		return nil, err
	}
	c := &chat{Model: req.Model, Temperature: req.Temperature, Stream: req.Stream != nil && *req.Stream,
		MaxTokens: req.MaxTokens, TopP: req.TopP, Stop: req.Stop, Seed: req.Seed, Echo: req.Echo != nil && *req.Echo, Raw: true}
	if c.MaxTokens == nil {
		n := defaultCompletionMaxTokens
		c.MaxTokens = &n
	}
	if err := c.readStreamOptions(req.StreamOptions); err != nil {
		return nil, err
	}
	prompts, e := parsePrompts(req.Prompt, "prompt")
	c.fail(e)
	for _, p := range prompts {
		g := []api.Message{{Content: p}}
		c.Groups = append(c.Groups, g)
		c.Messages = append(c.Messages, g...)
	}
	if c.Messages == nil {
		c.Messages = []api.Message{}
	}
	c.Stops, e = parseStop(req.Stop, "stop")
	c.fail(e)
	c.Format, e = parseResponseFormat(req.ResponseFormat)
	c.fail(e)
	if !isNull(req.Logprobs) {
		k, ok := jsonInt(req.Logprobs)
		switch {
		case !ok:
			c.fail(badRequest("`logprobs` must be an integer."))
		case k < 0 && k != -1:
			c.fail(badRequest("`logprobs` must be a positive value or -1."))
		default:
			c.Logprobs, c.TopLogprobs = true, k
			c.fail(checkLogprobsMax(k))
		}
	}
	if req.N != nil {
		c.N = *req.N
		c.checks = append(c.checks, checkN(*req.N))
	}
	c.checks = append(c.checks, func() *apiError {
		if n := c.choices(); n > maxChoices {
			return badRequest(fmt.Sprintf("n times the number of prompts must be at most %d, got %d.", maxChoices, n))
		}
		return nil
	})
	return c, nil
}

// parsePrompts reads a prompt or an embeddings input: a string, a list of
// strings, a list of token ids or a list of lists of them, as texts (a
// token id is the word "t<id>"). It refuses a missing or empty one.
func parsePrompts(raw json.RawMessage, field string) ([]string, *apiError) {
	empty := badRequest("Either prompt or prompt_embeds must be provided and non-empty.")
	if field != "prompt" {
		empty = badRequest(field + ": Field required")
	}
	if isNull(raw) {
		return nil, empty
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" && field == "prompt" {
			return nil, empty
		}
		return []string{one}, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 && field != "prompt" {
			return nil, badRequest(field + ": List should have at least 1 item after validation, not 0")
		}
		if len(list) == 0 {
			return nil, empty
		}
		return list, nil
	}
	tokens := func(ids []int) (string, bool) {
		ws := make([]string, len(ids))
		for i, id := range ids {
			if id < 0 {
				return "", false
			}
			ws[i] = "t" + strconv.Itoa(id)
		}
		return strings.Join(ws, " "), true
	}
	bad := badRequest(field + ": Input should be a valid string, a list of strings, a list of token ids or a list of lists of token ids")
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		t, ok := tokens(ids)
		if !ok || len(ids) == 0 {
			return nil, bad
		}
		return []string{t}, nil
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) != nil || len(lists) == 0 {
		return nil, bad
	}
	out := make([]string, len(lists))
	for i, l := range lists {
		t, ok := tokens(l)
		if !ok || len(l) == 0 {
			return nil, bad
		}
		out[i] = t
	}
	return out, nil
}

// textCompletion is a /v1/completions answer or chunk, laid out as vLLM
// writes it.
type textCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	Usage   any          `json:"usage,omitempty"`
}

type textChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	StopReason   json.RawMessage     `json:"stop_reason"`
	// PromptLogprobs is null in a non-streamed answer, absent in chunks.
	PromptLogprobs json.RawMessage `json:"prompt_logprobs,omitempty"`
}

// completionsReply answers /v1/completions: not streamed, every choice's
// text once its tokens' time has passed; streamed, at each step a chunk
// per choice still going with its next token, the last one carrying its
// finish_reason, the echoed prompt on its first, then the usage chunk when
// asked and "[DONE]".
func completionsReply(ctx context.Context, w http.ResponseWriter, cfg Config, d *dialect, p plan, c *chat) outcome {
	id, created := "cmpl-"+randomHex(), time.Now().Unix()
	n := max(c.N, 1)
	echo := func(i int) string {
		if !c.Echo {
			return ""
		}
		return c.Groups[i/n][0].Content
	}
	if !c.Stream {
		if o, ok := waitWhole(ctx, cfg, p); !ok {
			return o
		}
		choices := make([]textChoice, len(p.Choices))
		for i, r := range p.Choices {
			ch := textChoice{Index: i, Text: echo(i) + r.text(), FinishReason: &r.Finish, StopReason: stopReasonJSON(r), PromptLogprobs: jsonNull}
			if c.Logprobs {
				ch.Logprobs = completionLogprobsOf(cfg.Seed, i%n, r.Pieces, 0, len(echo(i)), c.TopLogprobs)
			}
			choices[i] = ch
		}
		var u any
		if fu := completionUsage(cfg, p); fu != nil {
			u = fu
		}
		writeJSON(w, http.StatusOK, textCompletion{ID: id, Object: "text_completion", Created: created, Model: cfg.Model, Choices: choices, Usage: u})
		return outcomeCompleted
	}

	rc, ok := startStream(ctx, w, p, eventStreamType)
	if !ok {
		return outcomeCancelled
	}
	out := sse{ctx, w, rc}
	if d.emptyID {
		id = ""
	}
	write := func(v any) bool {
		return out.raw(append(append([]byte(d.dataPrefix), encodeJSON(v)...), "\n\n"...))
	}
	var u *usage
	if !cfg.NoUsage && (c.IncludeUsage || d.usageInFinish) {
		v := newUsage(p.PromptTokens, p.completionTokens())
		u = &v
	}
	inFinish := cfg.UsageInFinish || d.usageInFinish
	left := len(p.Choices)
	offsets := make([]int, len(p.Choices))
	// piece sends choice i's token at step (none for a choice without
	// tokens), finishing the choice with its last.
	piece := func(i, step int) bool {
		r := p.Choices[i]
		ch := textChoice{Index: i, StopReason: jsonNull}
		var tok []string
		if step < len(r.Pieces) {
			tok = r.Pieces[step : step+1]
			ch.Text = tok[0]
		}
		if step == 0 {
			ch.Text = echo(i) + ch.Text
			offsets[i] = len(echo(i))
		}
		if c.Logprobs {
			ch.Logprobs = completionLogprobsOf(cfg.Seed, i%n, tok, step, offsets[i], c.TopLogprobs)
		}
		if len(tok) > 0 {
			offsets[i] += len(tok[0])
		}
		var cu any
		if step+1 >= len(r.Pieces) {
			ch.FinishReason, ch.StopReason = &r.Finish, stopReasonJSON(r)
			if left--; left == 0 && inFinish && u != nil {
				cu = u
			}
		}
		return write(textCompletion{ID: id, Object: "text_completion", Created: created, Model: cfg.Model, Choices: []textChoice{ch}, Usage: cu}) && ctx.Err() == nil
	}
	o, ok := emitSteps(ctx, cfg, p.seq, p.steps(),
		func(step int) bool {
			for i, r := range p.Choices {
				if (step < len(r.Pieces) || step == 0) && !piece(i, step) {
					return false
				}
			}
			return true
		}, nil,
		func() bool { return out.raw(d.streamError("Simulated replica failure (error_after).")) })
	if !ok {
		return o
	}
	if p.steps() == 0 {
		for i := range p.Choices {
			if !piece(i, 0) {
				return outcomeCancelled
			}
		}
	}
	if u != nil && !inFinish {
		if !write(textCompletion{ID: id, Object: "text_completion", Created: created, Model: cfg.Model, Choices: []textChoice{}, Usage: u}) || ctx.Err() != nil {
			return outcomeCancelled
		}
	}
	if !out.raw(append([]byte(d.dataPrefix), "[DONE]\n\n"...)) {
		return outcomeCancelled
	}
	return outcomeCompleted
}
