// Package llmvalidate is the `llm_validate` HTTP handler: it reads and
// checks the inference request body, and the token's scope for its model.
package llmvalidate

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmedge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_validate", parseCaddyfile)
}

// Handler answers 413/422/403 unless the body is a valid request the token covers.
type Handler struct {
	pipeline *gateway.Pipeline
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_validate", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := llmedge.FromContext(ctx)
	if err != nil {
		return err
	}
	h.pipeline = app.Pipeline()
	return nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, logFields := llmedge.Exchange(w, r)
	defer logFields()
	r, ok := h.pipeline.Validate(w, r)
	if !ok {
		return nil
	}
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile parses `llm_validate` (no arguments).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return llmedge.NoArgs(d)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	return m, m.UnmarshalCaddyfile(h.Dispenser)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
