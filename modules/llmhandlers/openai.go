package llmhandlers

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/modules/llmdoor"
)

func init() {
	caddy.RegisterModule(OpenAI{})
	httpcaddyfile.RegisterHandlerDirective("llm_openai", ParseCaddyfile[OpenAI])
}

// OpenAI is `llm_openai`: OpenAI's door alone (POST /v1/chat/completions,
// GET /v1/models, GET /v1/models/{id}), for a site that lays its paths
// out itself or serves OpenAI's API on a host of its own. Other paths get
// OpenAI's 404, or go to the next handler with Passthrough (e.g. a
// reverse_proxy for another /v1 path).
type OpenAI struct {
	Passthrough bool `json:"passthrough,omitempty"`

	mount gateway.Mount
}

// CaddyModule returns the Caddy module information.
func (OpenAI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_openai", New: func() caddy.Module { return new(OpenAI) }}
}

// Provision looks up the llmedge app and loads OpenAI's door.
func (h *OpenAI) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	d, err := llmdoor.Load(ctx, "openai")
	if err != nil {
		return err
	}
	h.mount = d.Mount(app.Pipeline(), LogFields)
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *OpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if s := h.mount.Handler(r.URL.Path); s != nil {
		s.ServeHTTP(w, r)
		return nil
	}
	if h.Passthrough {
		return next.ServeHTTP(w, r)
	}
	h.mount.NotFound(w, r)
	return nil
}

// UnmarshalCaddyfile parses:
//
//	llm_openai [<matcher>] {
//		passthrough
//	}
func (h *OpenAI) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
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
	_ caddy.Provisioner           = (*OpenAI)(nil)
	_ caddyhttp.MiddlewareHandler = (*OpenAI)(nil)
	_ caddyfile.Unmarshaler       = (*OpenAI)(nil)
)
