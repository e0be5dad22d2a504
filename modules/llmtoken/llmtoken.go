// Package llmtoken is the `llm_token` HTTP handler: the OAuth 2.0 password
// grant endpoint (POST /auth/token) that issues llmedge's access tokens.
package llmtoken

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/modules/llmedge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_token", llmedge.ParseCaddyfile[Handler])
}

// Handler issues tokens; it always answers.
type Handler struct{ llmedge.Endpoint }

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_token", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := llmedge.FromContext(ctx)
	if err != nil {
		return err
	}
	h.Serve = app.TokenEndpoint().ServeHTTP
	return nil
}

// UnmarshalCaddyfile parses `llm_token` (no arguments).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return llmedge.NoArgs(d) }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
