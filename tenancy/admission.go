package tenancy

import (
	"context"
	"net/http"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// Admitter applies the tenants' limits to requests that passed
// authorization: the pipeline's admission stage (gateway.StageAdmitted).
type Admitter interface {
	// Admit decides the request a describes and sets its rate-limit
	// headers in h, which go out with the answer whatever it is. It
	// returns the Ticket to settle when the request ends (nil when no
	// limit applies to it), or the refusal to answer instead.
	Admit(ctx context.Context, a *Admission, h http.Header) (Ticket, *api.Error)
}

// Admission describes a request to an Admitter.
type Admission struct {
	Principal *auth.Principal
	Model     string
	// PromptBytes and Messages measure the prompt as the replica will
	// receive it (the system message actually sent included), for a cheap
	// estimate of its tokens.
	PromptBytes, Messages int
	// MaxTokens is the reply cap the replica is given: the client's
	// max_tokens within the model's; 0 when neither sets one.
	MaxTokens int
}

// Ticket is an admitted request's hold on its limits. The pipeline
// settles it exactly once, when the request has ended however it ended
// (answered, failed, refused by the pool, the client gone).
type Ticket interface {
	Settle(s Settlement)
}

// Settlement is how an admitted request ended.
type Settlement struct {
	// Status is what the client got (499: it left first).
	Status int
	// Served: a replica was called (Attempts > 0); a request no replica
	// saw used nothing.
	Served bool
	// Usage is the replica's own count, when UsageKnown.
	Usage      api.Usage
	UsageKnown bool
	// Relayed is the answer's text that reached the gateway, in bytes:
	// what the estimate of the completion rests on when the replica
	// reported no usage (the client left mid-stream, the replica died).
	Relayed int
}
