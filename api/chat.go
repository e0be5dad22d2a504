package api

// Chat is a validated chat request, whichever public API it came through:
// what the gateway routes and what replicas are asked.
type Chat struct {
	// Model is the model type asked for.
	Model    string
	Messages []Message
	// SystemMessage, when set, replaces a leading system message.
	SystemMessage *string
	// Stream asks for the answer as a stream of deltas.
	Stream bool
	// IncludeUsage asks for a usage chunk at the end of an OpenAI stream.
	IncludeUsage bool
	Sampling     Sampling
	// User is an end-user identifier the client passed along (OpenAI's
	// "user"); never trusted for authorization.
	User string
}

// Sampling are the generation parameters a client may set; nil and zero
// fields leave the choice to the model's configuration or the replica.
type Sampling struct {
	Temperature *float64
	TopP        *float64
	// MaxTokens caps the reply; 0 means no cap from the client.
	MaxTokens int
	Stop      []string
	Seed      *int64
}

// Chat returns req as a Chat.
func (req *InferenceRequest) Chat() Chat {
	return Chat{
		Model:         req.ModelType,
		Messages:      req.Messages,
		SystemMessage: req.SystemMessage,
		Stream:        req.Stream,
		Sampling:      Sampling{Temperature: &req.Temperature},
	}
}
