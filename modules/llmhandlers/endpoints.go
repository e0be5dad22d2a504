package llmhandlers

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
)

func init() {
	for _, m := range []caddy.Module{Token{}, Revoke{}, JWKS{}, Health{}} {
		caddy.RegisterModule(m)
	}
	httpcaddyfile.RegisterHandlerDirective("llm_token", ParseCaddyfile[Token])
	httpcaddyfile.RegisterHandlerDirective("llm_revoke", ParseCaddyfile[Revoke])
	httpcaddyfile.RegisterHandlerDirective("llm_jwks", ParseCaddyfile[JWKS])
	httpcaddyfile.RegisterHandlerDirective("llm_health", ParseCaddyfile[Health])
}

// Token is `llm_token`: the OAuth 2.0 token endpoint (POST /auth/token)
// that issues llmedge's access tokens.
type Token struct{ Endpoint }

// Revoke is `llm_revoke`: OAuth 2.0 token revocation (RFC 7009, POST
// /auth/revoke under llm_gateway), for a site that lays the API out
// itself.
type Revoke struct{ Endpoint }

// JWKS is `llm_jwks`: the public keys that verify llmedge's tokens (GET
// /.well-known/jwks.json), so other services can check them too.
type JWKS struct{ Endpoint }

// Health is `llm_health`: liveness (the process is up) or readiness
// (every model has a usable replica) for load balancers and
// orchestrators.
type Health struct {
	// Check is "live" (default) or "ready".
	Check string `json:"check,omitempty"`

	Endpoint
}

// CaddyModule returns the Caddy module information.
func (Token) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_token", New: func() caddy.Module { return new(Token) }}
}

// CaddyModule returns the Caddy module information.
func (Revoke) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_revoke", New: func() caddy.Module { return new(Revoke) }}
}

// CaddyModule returns the Caddy module information.
func (JWKS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_jwks", New: func() caddy.Module { return new(JWKS) }}
}

// CaddyModule returns the Caddy module information.
func (Health) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_health", New: func() caddy.Module { return new(Health) }}
}

// Provision looks up the llmedge app.
func (h *Token) Provision(ctx caddy.Context) error {
	return withApp(ctx, func(app *llmapp.App) { h.Serve = app.TokenEndpoint().ServeHTTP })
}

// Provision looks up the llmedge app.
func (h *Revoke) Provision(ctx caddy.Context) error {
	return withApp(ctx, func(app *llmapp.App) { h.Serve = app.RevokeEndpoint().ServeHTTP })
}

// Provision looks up the llmedge app.
func (h *JWKS) Provision(ctx caddy.Context) error {
	return withApp(ctx, func(app *llmapp.App) {
		h.Serve = func(w http.ResponseWriter, _ *http.Request) { gateway.ServeJWKS(w, app.JWKS()) }
	})
}

// Provision looks up the llmedge app.
func (h *Health) Provision(ctx caddy.Context) error {
	return withApp(ctx, func(app *llmapp.App) {
		h.Serve = gateway.ServeHealth
		if h.Check == "ready" {
			h.Serve = app.Pipeline().Gateway.ServeReady
		}
	})
}

func withApp(ctx caddy.Context, fn func(*llmapp.App)) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	fn(app)
	return nil
}

// Validate checks Check.
func (h *Health) Validate() error {
	if h.Check != "" && h.Check != "live" && h.Check != "ready" {
		return fmt.Errorf("llm_health: check must be live or ready, not %q", h.Check)
	}
	return nil
}

// UnmarshalCaddyfile parses `llm_token` (no arguments).
func (h *Token) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return NoArgs(d) }

// UnmarshalCaddyfile parses `llm_revoke` (no arguments).
func (h *Revoke) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return NoArgs(d) }

// UnmarshalCaddyfile parses `llm_jwks` (no arguments).
func (h *JWKS) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return NoArgs(d) }

// UnmarshalCaddyfile parses `llm_health [live|ready]`.
func (h *Health) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		h.Check = d.Val()
	}
	if d.NextArg() || d.NextBlock(0) {
		return d.Err("llm_health takes one optional argument: live or ready")
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Token)(nil)
	_ caddy.Provisioner           = (*Revoke)(nil)
	_ caddy.Provisioner           = (*JWKS)(nil)
	_ caddy.Provisioner           = (*Health)(nil)
	_ caddy.Validator             = (*Health)(nil)
	_ caddyhttp.MiddlewareHandler = (*Token)(nil)
	_ caddyhttp.MiddlewareHandler = (*Revoke)(nil)
	_ caddyhttp.MiddlewareHandler = (*JWKS)(nil)
	_ caddyhttp.MiddlewareHandler = (*Health)(nil)
	_ caddyfile.Unmarshaler       = (*Token)(nil)
	_ caddyfile.Unmarshaler       = (*Revoke)(nil)
	_ caddyfile.Unmarshaler       = (*JWKS)(nil)
	_ caddyfile.Unmarshaler       = (*Health)(nil)
)
