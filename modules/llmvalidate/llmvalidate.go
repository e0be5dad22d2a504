// Package llmvalidate is the `llm_validate` HTTP handler: it authenticates the request, reads and checks the chat request body (413/422) and the credential's scope for its model (403), and passes the request on.
package llmvalidate

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
	httpcaddyfile.RegisterHandlerDirective("llm_validate", llmedge.ParseCaddyfile[Handler])
}

// Handler runs the inference pipeline up to StageAuthorized (every earlier
// stage the request has not passed included).
type Handler struct{ llmedge.Stage }

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_validate", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app's pipeline.
func (h *Handler) Provision(ctx caddy.Context) error {
	return h.ProvisionStage(ctx, gateway.StageAuthorized)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
