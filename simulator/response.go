package simulator

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
)

// completion is a non-streamed chat answer, laid out as vLLM writes it.
type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *fullUsage         `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int             `json:"index"`
	Message      replyMessage    `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

type replyMessage struct {
	Role string `json:"role"`
	// Content is null when the message is a tool call.
	Content *string `json:"content"`
	// ReasoningContent is the reasoning of an engine that separates it
	// (reasoning.go).
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls"`
}

// toolCallOut is a tool call of a non-streamed answer, in vLLM's field
// order.
type toolCallOut struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// usage is vLLM's UsageInfo, in vLLM's field order.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// Details is a stream's prompt_tokens_details, sent only with
	// Config.PromptTokensDetails.
	Details *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// promptTokensDetails is vLLM's PromptTokenUsageInfo.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// detailsOf is a request's prompt_tokens_details, nil unless cfg asks
// for them.
func detailsOf(cfg Config, p plan) *promptTokensDetails {
	if !cfg.PromptTokensDetails {
		return nil
	}
	d := &promptTokensDetails{}
	if p.seq != nil {
		d.CachedTokens = p.seq.cached
	}
	return d
}

// fullUsage is usage as the non-streamed answer carries it.
type fullUsage struct {
	usage
	PromptTokensDetails json.RawMessage `json:"prompt_tokens_details"`
}

// chunk is one streamed event's payload.
type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	// StopReason is present (as null) only on the finishing chunk.
	StopReason json.RawMessage `json:"stop_reason,omitempty"`
}

type delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []deltaToolCall `json:"tool_calls,omitempty"`
}

// deltaToolCall is a streamed piece of a tool call: the first carries its
// id, type and function name, the others fragments of its arguments.
type deltaToolCall struct {
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Index    int            `json:"index"`
	Function *deltaFunction `json:"function,omitempty"`
}

type deltaFunction struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// stopReasonJSON is a choice's stop_reason: the stop string that ended
// it, or null.
func stopReasonJSON(r reply) json.RawMessage {
	if r.StopReason == "" {
		return jsonNull
	}
	return encodeJSON(r.StopReason)
}

// jsonNull is a literal JSON null for always-null fields.
var jsonNull = json.RawMessage("null")

// newUsage accounts prompt and completion tokens.
func newUsage(prompt, completion int) usage {
	return usage{PromptTokens: prompt, TotalTokens: prompt + completion, CompletionTokens: completion}
}

// completionID returns a fresh "chatcmpl-<32 hex>" id like vLLM's.
func completionID() string { return "chatcmpl-" + randomHex() }

// randomHex is 32 random hex digits, like the random_uuid() of vLLM's ids.
func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
