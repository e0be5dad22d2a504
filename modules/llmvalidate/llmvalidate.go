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
	httpcaddyfile.RegisterHandlerDirective("llm_validate", llmedge.ParseCaddyfile[Handler])
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
func (h *Handler) Provision(ctx caddy.Context) (err error) {
	h.pipeline, err = llmedge.PipelineFrom(ctx)
	return err
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

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
