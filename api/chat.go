package api

import "github.com/llmedge/llmedge/wire"

// Chat is a validated chat request, whichever public API it came through:
// what the gateway routes and what replicas are asked.
type Chat struct {
	// Model is the model type asked for.
	Model string
	// Asked is the name the request gave the model, when it was one of
	// the model's aliases (Model is then the model itself); "" when it
	// named the model.
	Asked    string
	Messages []Message
	// Items is the length of the request's list that max_messages bounds
	// (messages, or input items) as its door counted it; 0 when it is
	// len(Messages).
	Items int
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
	// Wire is the client's body as it came, when the door carries it
	// through to replicas that speak its format; nil for a door whose
	// requests are always translated (llmedge's own).
	Wire *Wire
	// Lease, when not nil, is the pooled buffer of a body not carried
	// through (no Wire: a carried body's is Wire.Lease) that Messages
	// point into (Message.Quoted): the pipeline gives it back when the
	// exchange is answered, and a replica request that sends the
	// messages' bytes in place holds it (Lease.Reader) while it reads.
	Lease *Lease
}

// Format names the wire format of a request body, and of its answer.
type Format string

// The formats the doors carry through.
const (
	FormatOpenAIChat        Format = "openai.chat"
	FormatOpenAICompletions Format = "openai.completions"
	FormatOpenAIEmbeddings  Format = "openai.embeddings"
	FormatOpenAIResponses   Format = "openai.responses"
	FormatAnthropicMessages Format = "anthropic.messages"
	// FormatAnthropicCountTokens is the body of Anthropic's
	// /v1/messages/count_tokens: a Messages request without max_tokens,
	// answered with {"input_tokens": n}.
	FormatAnthropicCountTokens Format = "anthropic.count_tokens"
)

// Wire is a client's request body in its door's format. The door read
// only what the gateway needs of it; a replica that speaks the format
// gets the rest as the client wrote it.
type Wire struct {
	Format Format
	Body   []byte
	// Lease, when not nil, is Body's: a pooled buffer that a replica
	// request's body reader must hold (Lease.Reader) while it reads it.
	Lease *Lease
	// Object is the whole body, and Members its top-level members with
	// their spans, in order: what a protocol edits (the model's name) and
	// what it must refuse when it cannot carry a member.
	Object  wire.Value
	Members []wire.Member
	// Messages are the elements of the body's messages (their spans),
	// when it has them: a system message is put before the first.
	Messages []wire.Value
	// Prompts are the elements of a completion's prompt or an embedding's
	// input when it is an array (a batch), as the door read them (their
	// spans): what the request's count reads instead of the array again.
	Prompts []wire.Value
	// ConvRead reports that the door counted the conversation (the
	// messages, or a Responses input) as it read it: ConvItems elements,
	// whose media parts cost ConvMedia tokens beyond their bytes' estimate
	// (reserve.Read). The request's count then reads it no more.
	ConvRead             bool
	ConvItems, ConvMedia int
	// Translate, when set, gives the same request in OpenAI's chat format,
	// for a replica that cannot take Format: one whose protocol does not
	// speak it, or one found not to serve it. It is called only then; its
	// error (a *protocols.Error of kind KindUnsupported) names what the
	// translation cannot carry.
	Translate func() (*Wire, error)
	// Tokenize, set on a count request (Anthropic's count_tokens), gives
	// it in OpenAI's chat format, for a protocol that counts its prompt
	// with the engine's tokenizer where the replica has no count endpoint
	// of Format. It never generates: unlike Translate, a protocol that
	// cannot count ignores it. TokenizeOnly: the model's replicas are
	// never asked in Format (its requests are translated): count with the
	// tokenizer at once.
	Tokenize     func() (*Wire, error)
	TokenizeOnly bool
}

// Member returns the member named name, if the body has it (not null).
func (w *Wire) Member(name string) (wire.Member, bool) {
	for _, m := range w.Members {
		if m.Name == name && m.Value.Given() {
			return m, true
		}
	}
	return wire.Member{}, false
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

// Name is the model's name as the request gave it: the alias it named,
// or the model.
func (c *Chat) Name() string {
	if c.Asked != "" {
		return c.Asked
	}
	return c.Model
}
