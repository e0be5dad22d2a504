// Package llmroute is the `llm_route` HTTP handler: it sends the request to a replica of its model and answers, after authenticating, validating and authorizing it if no earlier handler did.
package llmroute

import (
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

// Handler runs the inference pipeline up to StageRouted (every earlier
// stage the request has not passed included).
type Handler struct{ llmedge.Stage }

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_route", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app's pipeline.
func (h *Handler) Provision(ctx caddy.Context) error {
	return h.ProvisionStage(ctx, gateway.StageRouted)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
