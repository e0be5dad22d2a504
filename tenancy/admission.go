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
	// Team is the principal's team ("" for none), whose limits and
	// budgets apply on top of its own.
	Team string
	// PromptBytes and Messages measure the prompt as the replica will
	// receive it (the system message actually sent included), for a cheap
	// estimate of its tokens.
	PromptBytes, Messages int
	// ExtraTokens are prompt tokens counted directly rather than from
	// bytes (media parts at their fixed cost), added to the estimate.
	ExtraTokens int
	// Prompts is the number of prompts (a batched completion's; 0 or 1
	// for one), and Generations the generations asked of each (n,
	// best_of; 0 or 1 for one): each prompt's each generation may take a
	// whole reply. PromptBytes and Messages cover every prompt.
	Prompts, Generations int
	// MaxTokens is the reply cap the replica is given: the client's
	// smallest under any name within the model's; 0 when neither sets
	// one; NoReply for a request that generates no tokens (embeddings).
	MaxTokens int
	// Reply is set by the limits admitter to the reply cap it reserved
	// for each generation (MaxTokens, or its default reservation): the
	// gateway then caps the request's reply at it, under every name.
	Reply int
	// Fallback: the request, already admitted for the model it asked
	// for, is about to be served by Model, its fallback, because no
	// replica of the first could take it. The limits of the user and key
	// were taken then; Model's own apply now.
	Fallback bool
	// CostFactor is the part of the model's price the request pays (a
	// batch's line: its model's batch factor), for the cost budgets; 0
	// means the whole price.
	CostFactor float64
}

// NoReply is the MaxTokens of a request that generates no tokens: its
// reservation is its prompt's estimate alone.
const NoReply = -1

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
	// Model is the model that answered (a fallback, a rollout's share):
	// cost budgets are charged at its price. "" is the model admitted.
	Model string
}

// Admitters asks each admitter in order; the first refusal stands (the
// tickets already taken are settled as unserved), and the tickets of an
// admitted request are settled together.
type Admitters []Admitter

// Admit implements Admitter.
func (as Admitters) Admit(ctx context.Context, a *Admission, h http.Header) (Ticket, *api.Error) {
	var ts tickets
	for _, ad := range as {
		t, err := ad.Admit(ctx, a, h)
		if err != nil {
			ts.Settle(Settlement{Status: err.Status})
			return nil, err
		}
		if t != nil {
			ts = append(ts, t)
		}
	}
	switch len(ts) {
	case 0:
		return nil, nil
	case 1:
		return ts[0], nil
	}
	return ts, nil
}

type tickets []Ticket

func (ts tickets) Settle(s Settlement) {
	for _, t := range ts {
		t.Settle(s)
	}
}

// Join is one ticket settling both a and b (either may be nil): a request
// admitted twice, for its model and for the fallback that served it.
func Join(a, b Ticket) Ticket {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return tickets{a, b}
}
