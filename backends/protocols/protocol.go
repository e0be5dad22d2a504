// Package protocols translates the gateway's chat requests into the wire
// protocols that inference replicas speak, and their answers back.
// Each protocol lives in a subpackage implementing Protocol: openaicompat
// (vLLM, SGLang, TGI, llama.cpp server, Ollama's /v1), ollama (/api/chat)
// and nativeapi (llmedge's own API, for a gateway in front of another). They share the SSE and line readers of package sse,
// and the failure classification (classify.go) and request plumbing
// (post.go) of this package.
package protocols

import (
	"context"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/boundary/members"
	"github.com/llmedge/llmedge/wire"
)

// Request is what the gateway asks of one replica.
type Request struct {
	// BaseURL is the replica's root, e.g. "http://10.0.0.5:8000" (no trailing slash).
	BaseURL string
	// Model is the upstream model name sent to the replica (may be empty).
	Model    string
	Messages []api.Message
	// Sampling parameters; nil and zero values are left to the replica.
	Temperature *float64
	TopP        *float64
	// MaxTokens caps the reply length; 0 leaves it to the replica.
	MaxTokens int
	Stop      []string
	Seed      *int64
	// APIKey, when set, is sent as "Authorization: Bearer <key>".
	APIKey string
	// Lease, when not nil, is the pooled buffer Messages point into, for
	// a request not carried through (Wire's own otherwise): a replica
	// request that sends their bytes in place holds it while it reads.
	Lease *api.Lease
	// Wire is the client's request as the door received it, when the
	// door carries it through: a protocol that speaks its format sends
	// it on with the edits below and nothing else changed; one that does
	// not translates the fields above, and refuses (KindUnsupported,
	// naming the member) what it cannot carry.
	Wire *api.Wire
	// AddSystem, when set, is a system message to put first: the model's
	// default, for a request that brings none.
	AddSystem string
	// CapTokens, when set, replaces the reply cap the client gave (or
	// adds one): the model's max_tokens is lower.
	CapTokens int
	// Whole asks a protocol that streams a request carried through for
	// the one answer the client wants, made of the stream (Result.Raw):
	// the model streams from its replicas always, for the first-token and
	// idle timeouts to watch the call.
	Whole bool
	// Continue, when set, is the text of an answer another replica began
	// and failed to finish: the replica is asked to continue it, as the
	// conversation's final assistant message, rather than to answer anew
	// (see Continuing). Only a protocol that says so is given one.
	Continue string
	// Priority, when set, is the request's place in the replica's own
	// scheduling (vLLM's "priority": lower runs earlier), for an engine
	// started to schedule by it; a protocol that has no such member
	// ignores it.
	Priority *int
	// Members are the gateway's edits of the top-level members of a body
	// carried through, whatever its format (boundary/members: the engine
	// control members it owns set or removed); a protocol that builds its
	// own body ignores them.
	Members []members.Edit
}

// Result is a finished chat completion.
type Result struct {
	Content      string
	FinishReason string
	Usage        api.Usage
	// UsageKnown is false when the replica reported no usage at all.
	UsageKnown bool
	// Raw is the replica's answer as it wrote it, when it is in the
	// request's wire format (Format): a door of that format passes it on,
	// its model's name (at Model, a span of Raw) replaced with its own.
	Raw    []byte
	Format api.Format
	Model  wire.Value
	// Sent is when the request was written to the replica; FirstByte when the
	// first token (or the whole answer, non-streamed) arrived; Done when the
	// last byte arrived. inference_time is Done - Sent.
	Sent, FirstByte, Done time.Time
}

// Delta is one event of a streamed answer. It is valid until the
// DeltaFunc it is given to returns.
type Delta struct {
	// Text is the new text of the answer (of its first choice); "" when
	// the event brings none.
	Text string
	// Data is the replica's event as it wrote it, when it is in the
	// request's wire format (Format): a door of that format relays it, its
	// model's name (at Model, a span of Data) replaced with its own.
	Data   []byte
	Format api.Format
	Model  wire.Value
	// Event is the name of the replica's event (its SSE "event:" field),
	// for a format whose events are named (the Responses API's, Anthropic's
	// message_start, content_block_delta, ...), which a door relaying them
	// writes back; "" otherwise.
	Event string
	// Token is true when the event carries generated output (text, a tool
	// call's progress, a refusal) or a finish: the first such event ends
	// the wait for the first token.
	Token bool
	// UsageOnly marks an event that carries the usage alone, which the
	// gateway may have asked for on its own account.
	UsageOnly bool
}

// DeltaFunc receives each event of a streamed reply, in order. Returning
// an error aborts the stream (the replica request is cancelled) and Chat
// returns that error.
type DeltaFunc func(d *Delta) error

// Protocol speaks one replica protocol. Implementations are safe for
// concurrent use.
type Protocol interface {
	// Chat runs one chat completion on the replica. With onDelta nil the
	// request is not streamed; otherwise it is streamed and onDelta is called
	// for every non-empty text delta before Chat returns. Cancelling ctx
	// cancels the replica request at once.
	//
	// Errors are *Error when the replica was reached or the failure is known
	// (see Kind); ctx.Err() wrapped is returned when ctx ended first.
	Chat(ctx context.Context, client *http.Client, req *Request, onDelta DeltaFunc) (*Result, error)
}

// Kind classifies a replica failure, which decides retries, breaker
// accounting and the status the client sees.
type Kind int

const (
	// KindConnect: the replica could not be reached (dial, refused, reset
	// before any response). Safe to retry elsewhere.
	KindConnect Kind = iota + 1
	// KindTimeout: the replica did not answer in time.
	KindTimeout
	// KindOverloaded: the replica answered 429 or 503; retry elsewhere, it
	// is not broken.
	KindOverloaded
	// KindServer: 5xx (other than 503) or an error reported inside a 200 stream.
	KindServer
	// KindBadRequest: the replica rejected the request itself (4xx other
	// than 429, e.g. context length exceeded). The client gets 422 with
	// Message; the replica is not at fault.
	KindBadRequest
	// KindProtocol: the replica sent something unusable (malformed JSON,
	// stream cut before completion).
	KindProtocol
	// KindUnsupported: the replica's protocol cannot carry what the client
	// asked for (Message names the member); nothing was sent. The client
	// gets 400.
	KindUnsupported
)

func (k Kind) String() string {
	switch k {
	case KindConnect:
		return "connect"
	case KindTimeout:
		return "timeout"
	case KindOverloaded:
		return "overloaded"
	case KindServer:
		return "server"
	case KindBadRequest:
		return "bad_request"
	case KindProtocol:
		return "protocol"
	case KindUnsupported:
		return "unsupported"
	}
	return "unknown"
}

// Error is a classified replica failure.
type Error struct {
	Kind Kind
	// Status is the replica's HTTP status, 0 when none was received.
	Status int
	// Message is the replica's own error text when it sent one, else a
	// description of what went wrong. It never contains prompt text.
	Message string
	// Started is true when at least one delta was already delivered to
	// onDelta before the failure.
	Started bool
	// Param names the request member a KindUnsupported error is about.
	Param string
	Err   error
}

func (e *Error) Error() string {
	s := "replica " + e.Kind.String() + " error"
	if e.Status != 0 {
		s += " (HTTP " + http.StatusText(e.Status) + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Engine describes what a replica engine serves beside chat.
type Engine struct {
	// HealthPath answers GET with 2xx while the engine can serve; "" when
	// the engine has none (nothing is probed).
	HealthPath string
	// Metrics names the dialect of the engine's Prometheus endpoint
	// (/metrics), which tells its own load: "vllm", "sglang", "tgi",
	// "llamacpp"; "auto" to recognize any of them; "" when it has none.
	Metrics string
	// CacheSalt: the engine partitions its prefix cache by a request's
	// "cache_salt" (vLLM), which the gateway then sets per tenant.
	CacheSalt bool
}

// Speaker is implemented by a protocol that takes requests in wire
// formats beside OpenAI's chat (see Request.Wire).
type Speaker interface {
	// Speaks reports whether the protocol takes a request in format f.
	Speaks(f api.Format) bool
}

// Speaks reports whether p takes a request carried through in format f:
// OpenAI's chat format every protocol takes (carrying it through, or
// translating what it can of it); another format only a Speaker that says
// so. For one that does not, the gateway sends the request's translation
// (api.Wire.Translate) when the door gives one.
func Speaks(p Protocol, f api.Format) bool {
	if s, ok := p.(Speaker); ok {
		return s.Speaks(f)
	}
	return f == api.FormatOpenAIChat
}

// Continuing is implemented by a protocol that can ask its replica to
// continue an answer (Request.Continue): vLLM's and SGLang's
// continue_final_message, or an engine that continues a trailing
// assistant message as it is (Ollama, llama.cpp).
type Continuing interface {
	// Continues reports whether req, with Continue set, can be sent:
	// a format whose answers the protocol can continue.
	Continues(req *Request) bool
}

// Continues reports whether p can continue req's answer.
func Continues(p Protocol, req *Request) bool {
	c, ok := p.(Continuing)
	return ok && c.Continues(req)
}

// Describer is implemented by backends that know their engine.
type Describer interface {
	Engine() Engine
}
