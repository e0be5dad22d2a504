// Package gateway is the request path of llmedge, in the order a request
// travels it: a Pipeline authenticates the client, decodes its chat request
// through a Door (a public API: llmedge's own or OpenAI's), checks the
// credential's scope, then the Gateway picks a replica of the model, calls
// it (retrying elsewhere before the first byte reaches the client), relays
// the stream, enforces timeouts and answers with timing figures. It is
// plain Go; the Caddy modules call into it.
package gateway

import (
	"context"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/tenancy"
)

// Exchange is the state of one public request as it moves through the
// pipeline's stages, whichever handlers run them.
type Exchange struct {
	Start time.Time
	// RequestID is the gateway's own id of the request, unique (the
	// ledger's record id, the answer's id, the response's X-Request-ID);
	// ClientRequestID the X-Request-ID the client sent, when it is short
	// printable ASCII without markup, kept beside it ("" otherwise).
	RequestID       string
	ClientRequestID string
	// Door is the public API the request came through.
	Door Door
	// Stage is the last stage the request passed.
	Stage     Stage
	Principal *auth.Principal
	// Team is the principal's team ("" for none), found when it is
	// authenticated.
	Team string
	// Chat is the decoded request (valid from StageDecoded on).
	Chat api.Chat

	// Stage durations for Server-Timing.
	Auth, Validate, Queue, Upstream time.Duration

	// Outcome, for logs and metrics.
	Replica  string
	Attempts int
	// Rollout is the model that served the request as its share of
	// Chat.Model's weighted rollout; "" for a model without one.
	Rollout string
	// Fallback is the model that served the request in the place of the
	// one it asked for (Chat.Model), when none of that one's replicas
	// could; "" otherwise.
	Fallback string
	// Adapter is the LoRA adapter of Chat.Model the request asked for
	// (adapters.go); "" for the model's own weights.
	Adapter string
	// Continued lists, per continuation of the stream on another replica,
	// the completion tokens it continued after; nil when none.
	Continued []int
	// Choice is the balancing decision of the last attempt, by Policy.
	Choice pool.Choice
	Policy string
	Usage  api.Usage
	TTFT   time.Duration
	Finish string
	// Status is the HTTP status the client got (499: it left first). A
	// stream that failed after its start has 200 and StreamError set.
	Status      int
	StreamError bool

	// UsageKnown: Usage is the replica's own count, or for a request
	// whose client left, the gateway's count of it (clientLeft).
	UsageKnown bool
	// Relayed counts the bytes of answer text received from replicas, for
	// an estimate of the usage when none was reported.
	Relayed int
	// relayedTokens counts the token events received from replicas, the
	// completion of a request whose client left (clientLeft).
	relayedTokens int
	// enginePriority is the engine priority engine_priority fair gave the
	// request (enginefair.go): held here, the call points to it without
	// an allocation of its own.
	enginePriority int
	// Priority is the request's class of work (StageAdmitted on): its
	// credential's, lowered by the client's Llmedge-Priority header.
	Priority api.Priority
	// Shed: the request was refused as sheddable work, its model being
	// saturated.
	Shed bool
	// batch is the run of a batch's line, when the request is one (run
	// by the gateway itself as the batch's owner); nil for a client's
	// request. One pointer: the exchange of every request carries it.
	batch *batchRun
	// Admission is what the limits were asked (StageAdmitted); Ticket
	// what they granted, settled once the request ends.
	Admission tenancy.Admission
	Ticket    tenancy.Ticket

	// admits is the pipeline whose admitters admit the request for a
	// fallback model, under that model's own limits; nil admits all.
	admits *Pipeline

	// admitted: the request passed every stage before routing (Serve
	// ran): it is the ledger's to record.
	admitted bool
	// observed: metrics recorded. Beside admitted: the exchange stays
	// within its allocation's size class.
	observed bool
	body     []byte // the request body, once decoded
	splice   splice // what a continuation needs of the stream (continue.go)
	// tryModel's state, held here rather than allocated apart for each
	// request: the pool's request, the answer's text so far. (The
	// exchange is then 1,024 bytes, an allocation class of its own: check
	// a field added against the next class, 1,152.)
	preq    pool.Request
	content strings.Builder
	// tracer makes the request's spans; nil when it is not traced.
	tracer trace.Tracer
}

// Model is the model type the request names, once decoded; "" before.
func (ex *Exchange) Model() string {
	if ex.Stage < StageDecoded {
		return ""
	}
	return ex.Chat.Model
}

type exchangeKey struct{}

// FromContext returns the request's Exchange, or nil.
func FromContext(ctx context.Context) *Exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return ex
}

// newExchange starts the state of a request arriving through door, and
// sets its X-Request-ID response header: the gateway's own id.
func newExchange(w http.ResponseWriter, r *http.Request, door Door) *Exchange {
	ex := &Exchange{Start: time.Now(), RequestID: newRequestID(), ClientRequestID: clientRequestID(r.Header.Get(api.RequestIDHeader)),
		Door: door, tracer: tracerOf(r.Context())}
	w.Header()[api.RequestIDHeader] = []string{ex.RequestID} // as Set would, without building the key again
	if p, ok := door.(Preparer); ok {
		p.Prepare(w, r)
	}
	return ex
}

// releaseBody gives a pooled body back (see Through): the decoded chat's
// lease, its carried body's or its messages'.
func (ex *Exchange) releaseBody() {
	if w := ex.Chat.Wire; w != nil {
		w.Lease.Release()
	}
	ex.Chat.Lease.Release()
}
