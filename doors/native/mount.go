package native

import (
	"net/http"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/gateway"
)

// Mount serves the native door's path through the shared pipeline.
type Mount struct {
	pipeline *gateway.Pipeline
	door     Door
	done     func(r *http.Request, ex *gateway.Exchange)
	chat     http.Handler // made once: Handler runs per request
}

// NewMount returns the mount served through pipeline and door; done, when
// not nil, hears every request once it is answered (the access log's
// fields).
func NewMount(pipeline *gateway.Pipeline, door Door, done func(*http.Request, *gateway.Exchange)) *Mount {
	m := &Mount{pipeline: pipeline, door: door, done: done}
	m.chat = http.HandlerFunc(m.serveChat)
	return m
}

// Handler implements gateway.Mount.
func (m *Mount) Handler(path string) http.Handler {
	if path == Path {
		return m.chat
	}
	return nil
}

// Prefix implements gateway.Mount.
func (*Mount) Prefix() string { return "/tasks/" }

// NotFound implements gateway.Mount.
func (*Mount) NotFound(w http.ResponseWriter, _ *http.Request) {
	api.NewError(http.StatusNotFound, "Not Found").Write(w)
}

func (m *Mount) serveChat(w http.ResponseWriter, r *http.Request) {
	if !gateway.Allow(w, r, http.MethodPost) {
		return
	}
	ex := m.pipeline.Serve(w, r, m.door)
	if m.done != nil {
		m.done(r, ex)
	}
}

var _ gateway.Mount = (*Mount)(nil)
