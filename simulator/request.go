package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
)

// maxBodyBytes bounds a chat request body.
const maxBodyBytes = 32 << 20

// chatRequest is an OpenAI chat-completions request as the simulator reads
// it; other fields are accepted and ignored, as vLLM does.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Temperature         *float64        `json:"temperature"`
	Stream              *bool           `json:"stream"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	StreamOptions       json.RawMessage `json:"stream_options"`
	// Sampling fields that only tests look at (the reply does not depend
	// on them): they show what a gateway passed on.
	TopP *float64        `json:"top_p"`
	Stop json.RawMessage `json:"stop"`
	Seed *int64          `json:"seed"`
	// The rest of the request that changes the answer's shape.
	N              *int            `json:"n"`
	Logprobs       *bool           `json:"logprobs"`
	TopLogprobs    json.RawMessage `json:"top_logprobs"`
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
	// Checked for their type and range only.
	FrequencyPenalty *float64                   `json:"frequency_penalty"`
	PresencePenalty  *float64                   `json:"presence_penalty"`
	LogitBias        map[string]float64         `json:"logit_bias"`
	ReasoningEffort  *string                    `json:"reasoning_effort"`
	Metadata         map[string]json.RawMessage `json:"metadata"`
	// vLLM's chat template options: continue the final (assistant)
	// message rather than answer it (continue.go).
	ContinueFinalMessage *bool `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`

	// vLLM's template kwargs: enable_thinking asks for reasoning
	// (reasoning.go).
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`

	// vLLM's scheduling priority (lower runs sooner), read with
	// scheduling_policy priority (sched.go).
	Priority *int `json:"priority"`
}

type chatMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// contentPart is one part of a message content list; image parts carry
// their source in ImageURL (chat) or Image (Responses' input_image).
type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chat is a decoded request of any chat-like API (chat completions, the
// engines' own chat APIs, /v1/completions, /v1/messages, /v1/responses),
// before validation.
type chat struct {
	Model string
	// Messages are the request's messages as text (content parts joined),
	// what the reply text depends on and LastRequest records.
	Messages            []api.Message
	Temperature         *float64
	Stream              bool
	MaxTokens           *int
	MaxCompletionTokens *int
	// NoTruncate is Ollama's "truncate": false: a prompt longer than the
	// context is refused instead of cut.
	NoTruncate bool
	// StreamOptions is true when stream_options was a non-empty object
	// (vLLM treats null and {} as absent).
	StreamOptions bool
	IncludeUsage  bool
	// MessagesMissing is true when "messages" was absent or null.
	MessagesMissing bool
	// TopP, Stop (a string or a list, as sent) and Seed are recorded only.
	TopP *float64
	Stop json.RawMessage
	Seed *int64

	// N is the number of choices (0 means 1).
	N int
	// Logprobs asks for the sampled tokens' log probabilities, with
	// TopLogprobs alternatives each (chat; /v1/completions' logprobs).
	Logprobs    bool
	TopLogprobs int
	// Stops are the stop strings: the reply ends before the first one.
	Stops []string
	// Tools and ToolChoice: the functions offered and which to call.
	Tools      []toolDef
	ToolChoice toolChoice
	// Format asks for JSON output.
	Format *outputFormat
	// Prompt is the engine's rendering of the messages, with tool
	// definitions, tool calls and image placeholders; nil means Messages.
	Prompt []api.Message
	// LastRole is the role of the last message ("tool" after a tool
	// result).
	LastRole string
	// Groups are the prompts of a /v1/completions batch, one raw message
	// each: choice i answers Groups[i/N]. nil for the chat APIs.
	Groups [][]api.Message
	// Raw marks a request that validate need not check the messages of:
	// /v1/completions (its prompts are raw text) and /v1/responses (its
	// decoder checks the input).
	Raw bool
	// Extra is what an API's answer needs of its request beyond the above.
	Extra any
	// Echo prepends the prompt to each choice's text (/v1/completions).
	Echo bool
	// ContinueFinal is vLLM's continue_final_message: the reply goes on
	// from the last message, the assistant's (continue.go).
	ContinueFinal bool
	// Thinking asks the model to reason first (reasoning.go).
	Thinking bool
	// Priority is the request's scheduling priority (0 when absent).
	Priority int
	// invalid is the first semantic error found while decoding, which
	// validate reports after the checks of the messages.
	invalid *apiError
	// checks are further checks for validate, in order.
	checks []func() *apiError
}

// fail records e as the request's error unless one is recorded already.
func (c *chat) fail(e *apiError) {
	if c.invalid == nil {
		c.invalid = e
	}
}

// decodeChat reads a chat request body. It fails only on malformed JSON or
// fields of the wrong type; semantic checks are left to validate.
func decodeChat(r *http.Request, w http.ResponseWriter) (*chat, error) {
	var req chatRequest
	if err := readBody(r, w, &req); err != nil {
		return nil, err
	}
	c := &chat{
		Model:               req.Model,
		Temperature:         req.Temperature,
		Stream:              req.Stream != nil && *req.Stream,
		MaxTokens:           req.MaxTokens,
		MaxCompletionTokens: req.MaxCompletionTokens,
		MessagesMissing:     req.Messages == nil,
		TopP:                req.TopP,
		Stop:                req.Stop,
		Seed:                req.Seed,
		Logprobs:            req.Logprobs != nil && *req.Logprobs,
		Thinking:            thinks(req.ChatTemplateKwargs, req.ReasoningEffort),
	}
	if req.Priority != nil {
		c.Priority = *req.Priority
	}
	if err := c.readStreamOptions(req.StreamOptions); err != nil {
		return nil, err
	}
	var cv convo
	var e *apiError
	c.Tools, e = parseChatTools(req.Tools)
	c.fail(e)
	c.ToolChoice, e = parseChatToolChoice(req.ToolChoice, c.Tools)
	c.fail(e)
	c.Format, e = parseResponseFormat(req.ResponseFormat)
	c.fail(e)
	c.Stops, e = parseStop(req.Stop, "stop")
	c.fail(e)
	cv.addTools(c.Tools)
	for i, m := range req.Messages {
		text, images, err := flattenContent(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		extra, err := renderToolCalls(m.ToolCalls)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].tool_calls: %w", i, err)
		}
		for _, img := range images {
			extra = strings.TrimSpace(extra + " " + imageWords(img))
		}
		cv.add(m.Role, text, extra)
	}
	cv.fill(c)
	c.readContinue(req.ContinueFinalMessage, req.AddGenerationPrompt)
	if req.N != nil {
		c.N = *req.N
		c.checks = append(c.checks, checkN(*req.N))
	}
	c.TopLogprobs, e = parseTopLogprobs(req.TopLogprobs, c.Logprobs)
	c.fail(e)
	for _, p := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", req.FrequencyPenalty}, {"presence_penalty", req.PresencePenalty}} {
		if p.v != nil && (*p.v < -2 || *p.v > 2) {
			c.fail(badRequest(fmt.Sprintf("%s must be in [-2, 2], got %s.", p.name, pyFloat(*p.v))))
		}
	}
	return c, nil
}

// readStreamOptions reads stream_options: include_usage, and whether it
// was a non-empty object.
func (c *chat) readStreamOptions(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &opts); err != nil {
		return fmt.Errorf("stream_options: %w", err)
	}
	var o streamOptions
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("stream_options: %w", err)
	}
	c.StreamOptions = len(opts) > 0
	c.IncludeUsage = o.IncludeUsage
	return nil
}

// maxChoices bounds the choices of one request (n, times the prompts of a
// /v1/completions batch): the simulator's own limit, to bound memory.
const maxChoices = 128

// maxLogprobs is vLLM's default --max-logprobs.
const maxLogprobs = 20

// checkN is vLLM's check of n, and the simulator's bound.
func checkN(n int) func() *apiError {
	return func() *apiError {
		if n < 1 {
			return badRequest(fmt.Sprintf("n must be at least 1, got %d.", n))
		}
		if n > maxChoices {
			return badRequest(fmt.Sprintf("n must be at most %d, got %d.", maxChoices, n))
		}
		return nil
	}
}

// parseTopLogprobs reads a chat request's top_logprobs with vLLM's checks:
// an integer, 0..20 (or -1, the whole vocabulary), and only with logprobs.
func parseTopLogprobs(raw json.RawMessage, logprobs bool) (int, *apiError) {
	if isNull(raw) {
		return 0, nil
	}
	k, ok := jsonInt(raw)
	if !ok {
		return 0, badRequest("`top_logprobs` must be an integer.")
	}
	if k < 0 && k != -1 {
		return 0, badRequest("`top_logprobs` must be a positive value or -1.")
	}
	if k != 0 && !logprobs {
		return 0, badRequest("when using `top_logprobs`, `logprobs` must be set to true.")
	}
	return k, checkLogprobsMax(k)
}

// checkLogprobsMax is vLLM's refusal of more alternatives than
// --max-logprobs; -1 asks for the whole vocabulary.
func checkLogprobsMax(k int) *apiError {
	if k == -1 {
		k = len(words)
	}
	if k > maxLogprobs {
		return badRequest(fmt.Sprintf("Requested sample logprobs of %d, which is greater than max allowed: %d", k, maxLogprobs))
	}
	return nil
}

// jsonInt reads a JSON number with an integral value.
func jsonInt(raw json.RawMessage) (int, bool) {
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

// pyFloat formats f as Python's repr does for ordinary values ("2.0",
// "-2.5"), for messages copied from vLLM.
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return s
}

// renderToolCalls is the prompt rendering of an assistant message's
// tool_calls: each function's name and its arguments' words.
func renderToolCalls(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var calls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return "", err
	}
	var words []string
	for _, tc := range calls {
		words = append(words, callWords(tc.Function.Name, tc.Function.Arguments))
	}
	return strings.Join(words, " "), nil
}

// readBody decodes a JSON request body of at most maxBodyBytes into v.
func readBody(r *http.Request, w http.ResponseWriter, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return fmt.Errorf("reading the request body: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	return nil
}

// flattenContent turns a message content (a string, null, or a list of
// content parts) into text, text parts joined with newlines, and the
// sources of its image parts.
func flattenContent(raw json.RawMessage) (string, []string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return "", nil, nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, nil, err
	case raw[0] == '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", nil, err
		}
		var texts, images []string
		for _, p := range parts {
			switch p.Type {
			case "text", "input_text", "output_text":
				texts = append(texts, p.Text)
			case "image_url", "input_image", "image":
				images = append(images, string(p.ImageURL))
			}
		}
		return strings.Join(texts, "\n"), images, nil
	}
	return "", nil, errors.New("must be a string or a list of content parts")
}

// maxTokens is the requested reply cap: max_completion_tokens wins over
// max_tokens, as in vLLM. nil means no cap was asked for.
func (c *chat) maxTokens() *int {
	if c.MaxCompletionTokens != nil {
		return c.MaxCompletionTokens
	}
	return c.MaxTokens
}

// validate applies vLLM's request checks that do not depend on the model.
func (c *chat) validate() *apiError {
	// The errors found while decoding come first, as vLLM's "before"
	// validators run before its fields are checked.
	if c.invalid != nil {
		return c.invalid
	}
	if !c.Raw {
		if c.MessagesMissing {
			return badRequest("messages: Field required")
		}
		if len(c.Messages) == 0 {
			return badRequest("messages: List should have at least 1 item after validation, not 0")
		}
		for i, m := range c.Messages {
			if m.Role == "" {
				return badRequest(fmt.Sprintf("messages[%d].role: Field required", i))
			}
		}
	}
	if c.StreamOptions && !c.Stream {
		return badRequest("Stream options can only be defined when `stream=True`.")
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", c.MaxTokens}, {"max_completion_tokens", c.MaxCompletionTokens}} {
		if f.v != nil && *f.v < 1 {
			return badRequest(fmt.Sprintf("%s must be at least 1, got %d.", f.name, *f.v))
		}
	}
	if c.Temperature != nil && *c.Temperature < 0 {
		return badRequest(fmt.Sprintf("temperature must be non-negative, got %v.", *c.Temperature))
	}
	for _, check := range c.checks {
		if e := check(); e != nil {
			return e
		}
	}
	return nil
}

// choices is the number of choices c asks for: n for each prompt.
func (c *chat) choices() int {
	return max(c.N, 1) * max(len(c.Groups), 1)
}

// enginePrompt is what the engine prefills for c.
func (c *chat) enginePrompt() []api.Message {
	if c.Prompt != nil {
		return c.Prompt
	}
	return c.Messages
}
