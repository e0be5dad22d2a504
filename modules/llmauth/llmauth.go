// Package llmauth is the `llm_auth` HTTP handler: it verifies the bearer
// token of llmedge's token endpoint and passes authenticated requests on.
package llmauth

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
	httpcaddyfile.RegisterHandlerDirective("llm_auth", llmedge.ParseCaddyfile[Handler])
}

// Handler answers 401 unless the request carries a valid token.
type Handler struct {
	pipeline *gateway.Pipeline
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_auth", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) (err error) {
	h.pipeline, err = llmedge.PipelineFrom(ctx)
	return err
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, logFields := llmedge.Exchange(w, r)
	defer logFields()
	r, ok := h.pipeline.Authenticate(w, r)
	if !ok {
		return nil
	}
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile parses `llm_auth` (no arguments).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return llmedge.NoArgs(d)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
