// Package api holds the public API of llmedge: the request and response
// bodies of POST /tasks/assistant_inference, their validation, and the
// FastAPI-compatible error shapes. It imports nothing from Caddy.
package api

// Roles a chat message may carry.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool is a tool's result in OpenAI's chat (not in the native API).
	RoleTool = "tool"
)

// Message is one element of the request's messages.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Quoted, when not nil, is the content as the client's JSON spelled
	// it, a string with its quotes, and Content is empty. A door that
	// carries its body through leaves the text so: only a protocol that
	// translates the request needs it decoded (Text), and decoding a
	// 100 KB prompt is a second pass over it and a copy. Routing and the
	// limits read Written and Size, which need no decoding.
	Quoted []byte `json:"-"`
	// Parts, when not nil, are the elements of a content array as the
	// client's JSON spelled them, and Content and Quoted are empty: a
	// text part as its text (a string with its quotes), any other part
	// (an image, audio, a file) as written (an object). The message's
	// text is the parts joined with newlines, as vLLM joins them for a
	// chat template; like Quoted, it is decoded and joined only for a
	// protocol that translates the request (Text), and routing and the
	// limits read the parts in place (Pieces, Size).
	Parts [][]byte `json:"-"`
}

// Usage is the token accounting of one inference.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens are the prompt tokens the replica found in its prefix
	// cache, when it said so (CachedKnown): the measure of the routing's
	// prediction. No answer of the gateway's own carries them.
	CachedTokens int  `json:"-"`
	CachedKnown  bool `json:"-"`
}

// InferenceRequest is a validated body of POST /tasks/assistant_inference,
// with defaults applied.
type InferenceRequest struct {
	Messages      []Message `json:"messages"`
	ModelType     string    `json:"model_type"`
	Temperature   float64   `json:"temperature"`
	Stream        bool      `json:"stream"`
	SystemMessage *string   `json:"system_message"`
}

// InferenceResponse is the non-streamed answer, and the payload of the
// final `event: done` of a stream.
type InferenceResponse struct {
	Content   string `json:"content"`
	ModelType string `json:"model_type"`
	Usage     Usage  `json:"usage"`
	// UsageReported is absent in the usual answer. It is present, and
	// false, only when the replica reported no token counts at all: usage
	// is then all zeros, which means "unknown", never a count.
	UsageReported  *bool   `json:"usage_reported,omitempty"`
	ProcessingTime float64 `json:"processing_time"`
	InferenceTime  float64 `json:"inference_time"`
	MessageCount   int     `json:"message_count"`
}

// UsageNotReported is the value of InferenceResponse.UsageReported when
// the replica reported no usage.
func UsageNotReported() *bool {
	f := false
	return &f
}

// StreamDelta is the payload of each `data:` event of a stream.
type StreamDelta struct {
	Content string `json:"content"`
}
