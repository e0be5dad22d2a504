// Package llmrevoke is the `llm_revoke` HTTP handler: OAuth 2.0 token
// revocation (RFC 7009, POST /auth/revoke under llm_gateway), for a site
// that lays the API out itself.
package llmrevoke

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/modules/llmedge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_revoke", llmedge.ParseCaddyfile[Handler])
}

// Handler revokes tokens; it always answers.
type Handler struct{ llmedge.Endpoint }

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_revoke", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := llmedge.FromContext(ctx)
	if err != nil {
		return err
	}
	h.Serve = app.RevokeEndpoint().ServeHTTP
	return nil
}

// UnmarshalCaddyfile parses `llm_revoke` (no arguments).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return llmedge.NoArgs(d) }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
