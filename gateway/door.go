package gateway

import (
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// Door is a public API through which clients ask for chats: llmedge's
// own (doors/native) or OpenAI's (doors/openai). It reads a chat request from a body and
// writes answers and errors in its own shape; everything between (auth,
// scope, limits, routing, retries, timeouts) is the one pipeline's.
type Door interface {
	// Name identifies the door in logs and metrics ("native", "openai").
	Name() string
	// Decode reads and validates r's body. It returns the body too, so a
	// handler that passes the request on can hand it over again.
	Decode(r *http.Request) (api.Chat, []byte, *api.Error)
	// WriteError answers err; nothing has been sent yet.
	WriteError(w http.ResponseWriter, err *api.Error)
	// WriteAnswer answers a finished request that was not streamed.
	WriteAnswer(w http.ResponseWriter, a *Answer)
	// AppendDelta, AppendEnd and AppendStreamError encode the events of a
	// streamed answer: a replica's event (new text; in the door's own
	// format, the event as the replica wrote it, to relay), the end
	// (a.Content holds the whole text), and a failure after the stream
	// started. AppendDelta may append nothing (an event the door does not
	// show).
	AppendDelta(b []byte, a *Answer, d *protocols.Delta) []byte
	AppendEnd(b []byte, a *Answer) []byte
	AppendStreamError(b []byte, a *Answer, err *api.Error) []byte
}

// Continuer is implemented by a door whose streams may be continued on
// another replica when theirs fails mid-stream: the continuation's events
// are spliced into the stream the client reads, as one answer.
type Continuer interface {
	// Continue is called before a continuation's attempt, with the last
	// event the door wrote to the client (as sent): the door keeps in
	// a.Splice what it needs to write the continuation's events as the
	// same stream's (the first attempt's id; no second role). It reports
	// false when it cannot continue this stream.
	Continue(a *Answer, last []byte) bool
}

// Preparer is implemented by a Door that adjusts a request as it enters
// the pipeline, before any stage reads it: Anthropic's door takes its
// x-api-key header as the bearer credential, and names the request ID as
// its clients read it. Prepare runs once per request, whichever handler
// begins it.
type Preparer interface {
	Prepare(w http.ResponseWriter, r *http.Request)
}

// Answer is what a door needs to render an answer or its stream.
type Answer struct {
	// ID identifies the request (its X-Request-ID).
	ID string
	// Model is the model type asked for.
	Model   string
	Created time.Time
	// Content is the text so far (all of it at the end).
	Content      string
	FinishReason string
	Usage        api.Usage
	UsageKnown   bool
	// Processing and Inference are the public timing figures.
	Processing, Inference time.Duration
	MessageCount          int
	// IncludeUsage: the client asked for usage in its stream.
	IncludeUsage bool
	// Deltas counts the deltas sent before this one.
	Deltas int
	// Relayed is set by a door that relayed the replica's own events:
	// the end then adds only what the replica's stream does not carry.
	Relayed bool
	// State is the door's own, kept across the events of one attempt's
	// stream (a translation's open content block); nil when an attempt
	// begins.
	State any
	// Continued counts the continuations of the stream on other replicas
	// so far (see Continuer); Before is the completion tokens received
	// before the attempt under way, which it continues from. A door
	// relaying the replica's usage adds them up with ContinuedUsage.
	Continued, Before int
	// Splice is the door's own, kept across a stream's attempts: what its
	// continuations need of the events already sent (their id).
	Splice any
	// Raw is the replica's whole answer as it wrote it, when it is in the
	// request's wire format (RawFormat): a door of that format passes it
	// on, the model's name at RawModel (a span of Raw) replaced.
	Raw       []byte
	RawFormat api.Format
	RawModel  wire.Value
}
