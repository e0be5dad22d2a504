package gateway

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// fail answers with the error that ended the request: an HTTP error while
// nothing was sent, an `event: error` once the stream has started.
func (g *Gateway) fail(w http.ResponseWriter, sse *sseWriter, m *Model, ex *Exchange, ans *Answer, err error) {
	var open time.Duration
	if m.Pool != nil {
		open = m.Pool.Breaker().OpenTimeout
	}
	// A batch's line refused for want of capacity is the dispatcher's to
	// try again later, not the line's answer.
	if ex.batch != nil {
		ex.batch.busy = unavailable(err) || errors.Is(err, pool.ErrShed) || errors.Is(err, pool.ErrQueueTimeout)
	}
	e := overloadError(m.Name, m.Pool, err)
	if e == nil {
		e = adapterError(m.Name, err)
	}
	if e == nil {
		e = publicError(m.Name, open, err)
	}
	ex.Status = e.Status
	if sse != nil && sse.closeUnlessStarted() {
		ex.Status, ex.StreamError = http.StatusOK, true
		_ = sse.write(ex.Door.AppendStreamError(nil, ans, e))
		return
	}
	ex.Door.WriteError(w, e)
}

// publicError maps a failure to what the client sees. Replica addresses
// and internals stay out of it.
func publicError(model string, openTimeout time.Duration, err error) *api.Error {
	switch {
	case errors.Is(err, pool.ErrBreakersOpen):
		return api.NewError(http.StatusServiceUnavailable,
			"No healthy replica is available for model '"+model+"' (all are failing)").
			WithHeader("Retry-After", retryAfter(openTimeout))
	case errors.Is(err, pool.ErrNoReplicas):
		return api.NewError(http.StatusServiceUnavailable,
			"No healthy replica is available for model '"+model+"'").WithHeader("Retry-After", "5")
	case errors.Is(err, pool.ErrSaturated):
		return api.NewError(http.StatusTooManyRequests,
			"Every replica of model '"+model+"' is at capacity; retry later").WithHeader("Retry-After", "1")
	}
	var be *protocols.Error
	if !errors.As(err, &be) {
		return api.NewError(http.StatusBadGateway, "The replicas of model '"+model+"' failed to answer")
	}
	switch be.Kind {
	case protocols.KindUnsupported:
		e := api.NewError(http.StatusBadRequest, "Unsupported parameter: "+be.Message+".")
		e.Code, e.Param = "unsupported_parameter", be.Param
		return e
	case protocols.KindBadRequest:
		e := api.NewError(http.StatusUnprocessableEntity, "The model rejected the request: "+be.Message)
		if contextLengthExceeded(be.Message) {
			e.Code, e.Param = "context_length_exceeded", "messages"
		}
		return e
	case protocols.KindConnect:
		var ne net.Error
		if errors.As(be.Err, &ne) && ne.Timeout() {
			return api.NewError(http.StatusGatewayTimeout, "The replica for model '"+model+"' could not be reached in time")
		}
		// Every replica tried refused or dropped the connection: none is
		// healthy now: the README's 503, rather than 502.
		return api.NewError(http.StatusServiceUnavailable,
			"No healthy replica is available for model '"+model+"'").WithHeader("Retry-After", "5")
	case protocols.KindTimeout:
		return api.NewError(http.StatusGatewayTimeout, "The replica for model '"+model+"' did not answer in time")
	case protocols.KindOverloaded:
		return api.NewError(http.StatusTooManyRequests,
			"The replicas of model '"+model+"' are overloaded; retry later").WithHeader("Retry-After", "1")
	}
	return api.NewError(http.StatusBadGateway,
		"The replicas of model '"+model+"' failed to answer ("+be.Kind.String()+" error)")
}

// contextLengthExceeded recognizes a replica's refusal of a prompt (plus
// its reply cap) longer than the model's context, in the words each engine
// uses: vLLM and SGLang "context length", llama.cpp "context size", TGI
// "`inputs` tokens + `max_new_tokens` must be <= N". Clients retry such a
// request shortened, so OpenAI's API gives it a code of its own.
func contextLengthExceeded(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context length") || strings.Contains(m, "context size") ||
		strings.Contains(m, "context window") || strings.Contains(m, "max_new_tokens` must be <=")
}

// retryAfter is a Retry-After value of whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
