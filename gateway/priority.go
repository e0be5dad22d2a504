package gateway

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
)

// classify sets the request's class of work: its credential's
// (Gateway.PriorityOf), lowered by the Llmedge-Priority header when the
// client asks for less. A header asking for more is ignored — a client
// that always sends "critical" keeps its credential's class — and one
// that names no class is refused (400) before the limits are asked.
func (p *Pipeline) classify(w http.ResponseWriter, r *http.Request, ex *Exchange) bool {
	if ex.batch != nil {
		// A batch's line runs below every online class, whatever its
		// owner's credential's class.
		ex.Priority = api.PrioritySheddable
		return true
	}
	cred := api.PriorityStandard
	if f := p.Gateway.PriorityOf; f != nil {
		cred = f(ex.Principal)
	}
	asked := cred
	if h, ok := r.Header[api.PriorityHeader]; ok {
		v := strings.ToLower(strings.TrimSpace(strings.Join(h, ",")))
		a, err := api.ParsePriority(v)
		if err != nil || v == "" {
			e := api.NewError(http.StatusBadRequest,
				"Invalid "+api.PriorityHeader+" header: want critical, standard or sheddable")
			e.Code, e.Param = "invalid_priority", api.PriorityHeader
			p.reject(w, ex, e, "")
			return false
		}
		asked = a
	}
	ex.Priority = cred.Lower(asked)
	return true
}

// overloadError is what the client sees of a refusal under overload (a
// sheddable request shed, a wait past the queue limit), or nil for any
// other failure.
func overloadError(model string, p *pool.Pool, err error) *api.Error {
	var limit time.Duration
	if p != nil {
		limit = p.QueueTimeout()
	}
	switch {
	case errors.Is(err, pool.ErrShed):
		// Retry once a queue's worth of time has passed: the load that
		// made the pool saturated has had time to clear.
		return api.NewError(http.StatusTooManyRequests,
			"Model '"+model+"' is saturated and sheddable requests are refused until it is not; retry later").
			WithHeader("Retry-After", retryAfter(limit))
	case errors.Is(err, pool.ErrQueueTimeout):
		return api.NewError(http.StatusTooManyRequests,
			"No replica of model '"+model+"' freed a slot within the queue limit ("+limit.String()+"); retry later").
			WithHeader("Retry-After", "1")
	}
	return nil
}

// routed reports whether the request reached a model's queue.
func (ex *Exchange) routed() bool { return ex.Queue > 0 || ex.Attempts > 0 || ex.Shed }

// shed reports whether the request's answer is its refusal as sheddable
// work (not a fallback's answer after it).
func (ex *Exchange) shed() bool { return ex.Shed && ex.Status == 429 }
