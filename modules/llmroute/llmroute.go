// Package llmroute is the `llm_route` HTTP handler: it sends a validated
// inference request to a replica of its model and answers the client.
package llmroute

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
	httpcaddyfile.RegisterHandlerDirective("llm_route", llmedge.ParseCaddyfile[Handler])
}

// Handler is terminal: it always answers. It validates the body itself
// when no llm_validate ran before it.
type Handler struct {
	pipeline *gateway.Pipeline
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_route", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) (err error) {
	h.pipeline, err = llmedge.PipelineFrom(ctx)
	return err
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	r, logFields := llmedge.Exchange(w, r)
	defer logFields()
	h.pipeline.Route(w, r)
	return nil
}

// UnmarshalCaddyfile parses `llm_route` (no arguments).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return llmedge.NoArgs(d) }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
