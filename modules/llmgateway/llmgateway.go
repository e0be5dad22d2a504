// Package llmgateway is the `llm_gateway` HTTP handler: the whole public
// API of llmedge on its standard paths in one directive.
package llmgateway

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/frontends/openai"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmedge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_gateway", llmedge.ParseCaddyfile[Handler])
}

// Handler serves POST /auth/token, POST /auth/revoke, POST /tasks/assistant_inference,
// GET /.well-known/jwks.json, GET /openapi.json, GET /healthz, GET /readyz
// and OpenAI's API (POST /v1/chat/completions, GET /v1/models, GET
// /v1/models/{id}). Other paths get a JSON 404 (OpenAI's shape under
// /v1/), or go to the next handler with Passthrough.
type Handler struct {
	Passthrough bool `json:"passthrough,omitempty"`
	// DisableOpenAI leaves OpenAI's API out: /v1/ paths are then unknown
	// paths, and /openapi.json does not describe them.
	DisableOpenAI bool `json:"disable_openai,omitempty"`

	api *gateway.API
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_gateway", New: func() caddy.Module { return new(Handler) }}
}

// Provision looks up the llmedge app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := llmedge.FromContext(ctx)
	if err != nil {
		return err
	}
	h.api = &gateway.API{
		Token:       app.TokenEndpoint(),
		Revoke:      app.RevokeEndpoint(),
		JWKS:        app.JWKS,
		OpenAPI:     app.OpenAPI(),
		Pipeline:    app.Pipeline(),
		Native:      app.Native(),
		Passthrough: h.Passthrough,
		Done:        llmedge.LogFields,

		MaxHeaderBytes: app.Pipeline().MaxHeaderBytes,
	}
	if h.DisableOpenAI {
		if h.api.OpenAPI, err = api.WithoutPaths(h.api.OpenAPI, openai.Prefix); err != nil {
			return err
		}
	} else {
		h.api.Mounts = []gateway.Mount{app.OpenAI()}
	}
	return nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var nextErr error
	h.api.ServeHTTP(w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nextErr = next.ServeHTTP(w, r)
	}))
	return nextErr
}

// UnmarshalCaddyfile parses:
//
//	llm_gateway {
//		passthrough
//		openai on|off
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
		case "openai":
			if !d.NextArg() {
				return d.Errf("llm_gateway: openai: want on or off")
			}
			switch d.Val() {
			case "on":
				h.DisableOpenAI = false
			case "off":
				h.DisableOpenAI = true
			default:
				return d.Errf("llm_gateway: openai: want on or off, not %q", d.Val())
			}
			if d.NextArg() {
				return d.Errf("llm_gateway: openai takes one argument, on or off")
			}
		default:
			return d.Errf("unrecognized llm_gateway option %q", d.Val())
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
