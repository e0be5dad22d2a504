package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends"
	"github.com/llmedge/llmedge/pool"
)

// fail answers with the error that ended the request: an HTTP error while
// nothing was sent, an `event: error` once the stream has started.
func (g *Gateway) fail(w http.ResponseWriter, sse *sseWriter, m *Model, err error) {
	e := publicError(m.Name, err)
	if sse != nil && sse.isStarted() {
		_ = sse.write(appendEvent(nil, "error", marshal(map[string]any{"detail": e.Detail})))
		return
	}
	if sse != nil {
		sse.close() // no ping may slip out before the error status
	}
	e.Write(w)
}

// publicError maps a failure to what the client sees. Replica addresses
// and internals stay out of it.
func publicError(model string, err error) *api.Error {
	switch {
	case errors.Is(err, pool.ErrNoReplicas):
		return api.NewError(http.StatusServiceUnavailable,
			"No healthy replica is available for model '"+model+"'").WithHeader("Retry-After", "5")
	case errors.Is(err, pool.ErrSaturated):
		return api.NewError(http.StatusTooManyRequests,
			"Every replica of model '"+model+"' is at capacity; retry later").WithHeader("Retry-After", "1")
	}
	var be *backends.Error
	if !errors.As(err, &be) {
		return api.NewError(http.StatusBadGateway, "The replicas of model '"+model+"' failed to answer")
	}
	switch be.Kind {
	case backends.KindBadRequest:
		return api.NewError(http.StatusUnprocessableEntity, "The model rejected the request: "+be.Message)
	case backends.KindTimeout:
		return api.NewError(http.StatusGatewayTimeout, "The replica for model '"+model+"' did not answer in time")
	case backends.KindOverloaded:
		return api.NewError(http.StatusTooManyRequests,
			"The replicas of model '"+model+"' are overloaded; retry later").WithHeader("Retry-After", "1")
	}
	return api.NewError(http.StatusBadGateway,
		"The replicas of model '"+model+"' failed to answer ("+be.Kind.String()+" error)")
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}
