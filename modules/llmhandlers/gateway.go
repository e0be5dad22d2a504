package llmhandlers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/doors/openai"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/modules/llmdoor"
)

func init() {
	caddy.RegisterModule(Gateway{})
	httpcaddyfile.RegisterHandlerDirective("llm_gateway", ParseCaddyfile[Gateway])
}

// Gateway is `llm_gateway`: the whole public API of llmedge on its
// standard paths in one directive. It serves POST /auth/token, POST
// /auth/revoke, GET /.well-known/jwks.json, GET /openapi.json, GET
// /healthz, GET /readyz, GET /readyz/<model>, and every door on its paths: llmedge's own (POST
// /tasks/assistant_inference) and OpenAI's (POST /v1/chat/completions,
// GET /v1/models, GET /v1/models/{id}). Other paths get a JSON 404 (in a
// door's shape under its prefix), or go to the next handler with
// Passthrough.
type Gateway struct {
	Passthrough bool `json:"passthrough,omitempty"`
	// Doors names the doors to mount (modules of llmedge.doors); empty
	// mounts every registered door.
	Doors []string `json:"doors,omitempty"`
	// DisableOpenAI leaves OpenAI's door out: /v1/ paths are then unknown
	// paths, and /openapi.json does not describe them.
	DisableOpenAI bool `json:"disable_openai,omitempty"`

	site *gateway.Site
}

// CaddyModule returns the Caddy module information.
func (Gateway) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_gateway", New: func() caddy.Module { return new(Gateway) }}
}

// Provision looks up the llmedge app and loads the doors.
func (h *Gateway) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	h.site = &gateway.Site{
		Token:          app.TokenEndpoint(),
		Revoke:         app.RevokeEndpoint(),
		JWKS:           app.JWKS,
		OpenAPI:        app.OpenAPI(),
		Ready:          app.Pipeline().Gateway.ServeReady,
		ModelReady:     app.Pipeline().Gateway.ServeModelReady,
		Passthrough:    h.Passthrough,
		MaxHeaderBytes: app.Pipeline().MaxHeaderBytes,
	}
	names := h.Doors
	if len(names) == 0 {
		names = llmdoor.Names()
	}
	for _, name := range names {
		if name == "openai" && h.DisableOpenAI {
			continue
		}
		d, err := llmdoor.Load(ctx, name)
		if err != nil {
			return fmt.Errorf("door %q: %w", name, err)
		}
		h.site.Mounts = append(h.site.Mounts, d.Mount(app.Pipeline(), LogFields))
	}
	mounted := func(door string) bool { return len(h.Doors) == 0 || slices.Contains(h.Doors, door) }
	var keep []string // paths under OpenAI's prefix that are another door's
	if mounted("anthropic") {
		keep = append(keep, api.AnthropicPrefix)
	} else if h.site.OpenAPI, err = api.WithoutPaths(h.site.OpenAPI, api.AnthropicPrefix); err != nil {
		return err
	}
	if h.DisableOpenAI || !mounted("openai") {
		if h.site.OpenAPI, err = api.WithoutPaths(h.site.OpenAPI, openai.Prefix, keep...); err != nil {
			return err
		}
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if isReadiness(r.URL.Path) {
		// A 503 from /readyz is an answer, not a failure of the server:
		// its access log line is info, not the error Caddy logs a 5xx
		// at. The changes of readiness are logged once, as warnings.
		caddyhttp.SetVar(r.Context(), caddyhttp.LogLevelVar, "INFO")
	}
	var nextErr error
	h.site.ServeHTTP(w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nextErr = next.ServeHTTP(w, r)
	}))
	return nextErr
}

// isReadiness reports whether path is /readyz or /readyz/<model>.
func isReadiness(path string) bool {
	return path == gateway.PathReady || strings.HasPrefix(path, gateway.PathReady+"/")
}

// UnmarshalCaddyfile parses:
//
//	llm_gateway {
//		passthrough
//		doors <door>...
//		openai on|off
//	}
func (h *Gateway) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "passthrough":
			h.Passthrough = true
		case "doors":
			h.Doors = d.RemainingArgs()
			if len(h.Doors) == 0 {
				return d.Errf("llm_gateway: doors: want at least one of %v", llmdoor.Names())
			}
			for _, n := range h.Doors {
				if !slices.Contains(llmdoor.Names(), n) {
					return d.Errf("llm_gateway: doors: unknown door %q (want one of %v)", n, llmdoor.Names())
				}
			}
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
	_ caddy.Provisioner           = (*Gateway)(nil)
	_ caddyhttp.MiddlewareHandler = (*Gateway)(nil)
	_ caddyfile.Unmarshaler       = (*Gateway)(nil)
)
