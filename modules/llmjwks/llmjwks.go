// Package llmjwks is the `llm_jwks` HTTP handler: it publishes the public
// keys that verify llmedge's tokens (GET /.well-known/jwks.json), so other
// services can check them too.
package llmjwks

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
	httpcaddyfile.RegisterHandlerDirective("llm_jwks", llmedge.ParseCaddyfile[Handler])
}

// Handler serves the key set; it always answers.
type Handler struct{ llmedge.Endpoint }

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_jwks", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := llmedge.FromContext(ctx)
	if err != nil {
		return err
	}
	h.Serve = func(w http.ResponseWriter, _ *http.Request) { gateway.ServeJWKS(w, app.JWKS()) }
	return nil
}

// UnmarshalCaddyfile parses `llm_jwks` (no arguments).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return llmedge.NoArgs(d) }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
