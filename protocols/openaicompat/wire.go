package openaicompat

import (
	"bytes"
	"encoding/json"

	"github.com/llmedge/llmedge/api"
)

// wireResponse decodes both a chat.completion (non-streamed) and a
// chat.completion.chunk (one streamed event), and the error payloads that
// replicas put in their place.
type wireResponse struct {
	// Object is "error" in old vLLM's and SGLang's flat error shape.
	Object string `json:"object"`
	// Error is set in the {"error": ...} shapes (vLLM, llama.cpp, TGI).
	Error   json.RawMessage `json:"error"`
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
}

// wireChoice is one element of choices. Chunks carry Delta, completions
// Message.
type wireChoice struct {
	Delta        wireMessage `json:"delta"`
	Message      wireMessage `json:"message"`
	FinishReason *string     `json:"finish_reason"`
}

// wireMessage is the text part of a message or delta; a null content
// decodes as "".
type wireMessage struct {
	Content string `json:"content"`
}

// isError reports whether the payload is an error report rather than an
// answer.
func (w *wireResponse) isError() bool {
	if w.Object == "error" {
		return true
	}
	e := bytes.TrimSpace(w.Error)
	return len(e) > 0 && !bytes.Equal(e, []byte("null"))
}

// finishReason returns choices[0].finish_reason, "" when absent or null.
func (c *wireChoice) finishReason() string {
	if c.FinishReason == nil {
		return ""
	}
	return *c.FinishReason
}

// wireUsage is the replica's token accounting; absent fields stay nil.
type wireUsage struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
	TotalTokens      *int `json:"total_tokens"`
}

// toAPI converts u, reporting false when it carries no count at all. A
// missing total is the sum of the two parts when both are present; nothing
// else is made up.
func (u *wireUsage) toAPI() (api.Usage, bool) {
	if u == nil || (u.PromptTokens == nil && u.CompletionTokens == nil && u.TotalTokens == nil) {
		return api.Usage{}, false
	}
	var out api.Usage
	if u.PromptTokens != nil {
		out.PromptTokens = *u.PromptTokens
	}
	if u.CompletionTokens != nil {
		out.CompletionTokens = *u.CompletionTokens
	}
	switch {
	case u.TotalTokens != nil:
		out.TotalTokens = *u.TotalTokens
	case u.PromptTokens != nil && u.CompletionTokens != nil:
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out, true
}
