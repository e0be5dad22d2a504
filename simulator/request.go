package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/llmedge/llmedge/api"
)

// maxBodyBytes bounds a chat request body.
const maxBodyBytes = 32 << 20

// chatRequest is the subset of an OpenAI chat-completions request the
// simulator reads; other fields are accepted and ignored, as vLLM does.
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
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chat is a decoded chat request, before validation.
type chat struct {
	Model               string
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
	}
	if so := bytes.TrimSpace(req.StreamOptions); len(so) > 0 && !bytes.Equal(so, []byte("null")) {
		var opts map[string]json.RawMessage
		if err := json.Unmarshal(so, &opts); err != nil {
			return nil, fmt.Errorf("stream_options: %w", err)
		}
		var o streamOptions
		if err := json.Unmarshal(so, &o); err != nil {
			return nil, fmt.Errorf("stream_options: %w", err)
		}
		c.StreamOptions = len(opts) > 0
		c.IncludeUsage = o.IncludeUsage
	}
	c.Messages = make([]api.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		text, err := flattenContent(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		c.Messages = append(c.Messages, api.Message{Role: m.Role, Content: text})
	}
	return c, nil
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
// content parts) into text; text parts are joined with newlines.
func flattenContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case raw[0] == '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", errors.New("must be a string or a list of content parts")
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
	return nil
}
