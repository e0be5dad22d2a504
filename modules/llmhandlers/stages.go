package llmhandlers

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/gateway"
)

func init() {
	caddy.RegisterModule(Auth{})
	caddy.RegisterModule(Validate{})
	caddy.RegisterModule(Route{})
	httpcaddyfile.RegisterHandlerDirective("llm_auth", ParseCaddyfile[Auth])
	httpcaddyfile.RegisterHandlerDirective("llm_validate", ParseCaddyfile[Validate])
	httpcaddyfile.RegisterHandlerDirective("llm_route", ParseCaddyfile[Route])
}

// Auth is `llm_auth`: it verifies the request's credential (401
// otherwise) and passes the request on.
type Auth struct{ Stage }

// Validate is `llm_validate`: it authenticates the request, reads and
// checks the chat request body (413/422) and the credential's scope for
// its model (403), and passes the request on.
type Validate struct{ Stage }

// Route is `llm_route`: it sends the request to a replica of its model and
// answers, after authenticating, validating and authorizing it if no
// earlier handler did.
type Route struct{ Stage }

// CaddyModule returns the Caddy module information.
func (Auth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_auth", New: func() caddy.Module { return new(Auth) }}
}

// CaddyModule returns the Caddy module information.
func (Validate) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_validate", New: func() caddy.Module { return new(Validate) }}
}

// CaddyModule returns the Caddy module information.
func (Route) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_route", New: func() caddy.Module { return new(Route) }}
}

// Provision runs the pipeline up to StageAuthenticated.
func (h *Auth) Provision(ctx caddy.Context) error {
	return h.provision(ctx, gateway.StageAuthenticated)
}

// Provision runs the pipeline up to StageAuthorized: authenticated,
// decoded, and within the credential's scope.
func (h *Validate) Provision(ctx caddy.Context) error {
	return h.provision(ctx, gateway.StageAuthorized)
}

// Provision runs the pipeline to its end.
func (h *Route) Provision(ctx caddy.Context) error { return h.provision(ctx, gateway.StageRouted) }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Auth)(nil)
	_ caddy.Provisioner           = (*Validate)(nil)
	_ caddy.Provisioner           = (*Route)(nil)
	_ caddyhttp.MiddlewareHandler = (*Auth)(nil)
	_ caddyhttp.MiddlewareHandler = (*Validate)(nil)
	_ caddyhttp.MiddlewareHandler = (*Route)(nil)
	_ caddyfile.Unmarshaler       = (*Auth)(nil)
	_ caddyfile.Unmarshaler       = (*Validate)(nil)
	_ caddyfile.Unmarshaler       = (*Route)(nil)
)
