// Package llmhealth is the `llm_health` HTTP handler: liveness (the
// process is up) or readiness (every model has a usable replica) for load
// balancers and orchestrators.
package llmhealth

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmedge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_health", llmedge.ParseCaddyfile[Handler])
}

// Handler answers liveness or readiness; it always answers.
type Handler struct {
	// Check is "live" (default) or "ready".
	Check string `json:"check,omitempty"`

	llmedge.Endpoint
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_health", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := llmedge.FromContext(ctx)
	if err != nil {
		return err
	}
	h.Serve = gateway.ServeHealth
	if h.Check == "ready" {
		h.Serve = app.Pipeline().Gateway.ServeReady
	}
	return nil
}

// Validate checks Check.
func (h *Handler) Validate() error {
	if h.Check != "" && h.Check != "live" && h.Check != "ready" {
		return fmt.Errorf("llm_health: check must be live or ready, not %q", h.Check)
	}
	return nil
}

// UnmarshalCaddyfile parses `llm_health [live|ready]`.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
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
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
