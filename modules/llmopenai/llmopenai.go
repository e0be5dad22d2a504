// Package llmopenai is the `llm_openai` HTTP handler: OpenAI's API alone
// (POST /v1/chat/completions, GET /v1/models, GET /v1/models/{id}), for a
// site that lays its paths out itself or serves OpenAI's API on a host of
// its own.
package llmopenai

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/frontends/openai"
	"github.com/llmedge/llmedge/modules/llmedge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_openai", llmedge.ParseCaddyfile[Handler])
}

// Handler serves OpenAI's paths among the requests its matcher gives it.
// Other paths get OpenAI's 404, or go to the next handler with
// Passthrough (e.g. a reverse_proxy for /v1/embeddings).
type Handler struct {
	Passthrough bool `json:"passthrough,omitempty"`

	api *openai.API
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_openai", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := llmedge.FromContext(ctx)
	if err != nil {
		return err
	}
	h.api = app.OpenAI()
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if s := h.api.Handler(r.URL.Path); s != nil {
		s.ServeHTTP(w, r)
		return nil
	}
	if h.Passthrough {
		return next.ServeHTTP(w, r)
	}
	h.api.NotFound(w, r)
	return nil
}

// UnmarshalCaddyfile parses:
//
//	llm_openai [<matcher>] {
//		passthrough
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "passthrough":
			h.Passthrough = true
		default:
			return d.Errf("unrecognized llm_openai option %q", d.Val())
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
