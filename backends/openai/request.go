package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends"
)

// chatPath is the OpenAI-compatible chat completions endpoint.
const chatPath = "/v1/chat/completions"

// chatRequest is the JSON body of POST /v1/chat/completions.
type chatRequest struct {
	Model       string        `json:"model,omitempty"`
	Messages    []api.Message `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	TopP        *float64      `json:"top_p,omitempty"`
	Stream      bool          `json:"stream"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Stop        []string      `json:"stop,omitempty"`
	Seed        *int64        `json:"seed,omitempty"`
	// StreamOptions is only sent with stream: vLLM answers 400 to it on a
	// non-streamed request.
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

// streamOptions asks for the usage chunk at the end of a stream.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// newHTTPRequest builds the replica request for req, bound to ctx.
func newHTTPRequest(ctx context.Context, req *backends.Request, stream bool) (*http.Request, error) {
	body := chatRequest{
		Model:       req.Model,
		Messages:    req.Messages,
		Temperature: req.Temperature,
		TopP:        req.TopP,
		Stream:      stream,
		Stop:        req.Stop,
		Seed:        req.Seed,
	}
	if body.Messages == nil {
		body.Messages = []api.Message{}
	}
	if req.MaxTokens > 0 {
		body.MaxTokens = req.MaxTokens
	}
	if stream {
		body.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	buf, err := json.Marshal(body)
	if err != nil {
		// Only non-finite temperatures can get here; the message names the
		// value kind, never prompt text.
		return nil, &backends.Error{Kind: backends.KindBadRequest, Message: "cannot encode the chat request", Err: err}
	}

	url := strings.TrimRight(req.BaseURL, "/") + chatPath
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		return nil, &backends.Error{Kind: backends.KindConnect, Message: "invalid replica URL", Err: err}
	}
	hr.Header.Set("Content-Type", "application/json")
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
		// A compressing hop would hold tokens back; ask for none.
		hr.Header.Set("Accept-Encoding", "identity")
	} else {
		hr.Header.Set("Accept", "application/json")
	}
	if req.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+req.APIKey)
	}
	return hr, nil
}
