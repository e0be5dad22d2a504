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
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/modules/llmdoor"
)

// Every llmedge HTTP handler has one of two shapes: a Stage runs the
// inference pipeline up to one of its stages (llm_auth, llm_validate,
// llm_route), an Endpoint serves one thing of the app (llm_token,
// llm_revoke, llm_jwks, llm_health). Each handler module embeds its shape
// and adds only its Caddy module ID, what it serves and its options.

// Stage runs the pipeline up to Stage, through the public API named by
// API, then passes the request on; a request that a stage refused has its
// answer. The pipeline always runs the stages the request has not passed
// yet, in order, so no order or subset of stage handlers can route a
// request that llm_gateway would refuse.
type Stage struct {
	// API names the door (a module of llmedge.doors) whose shapes answers
	// and errors take: "native" (default), "openai", or another
	// registered door.
	API string `json:"api,omitempty"`
	// Scopes are required of the credential beyond the model's own (403
	// otherwise); for handlers that guard a plain reverse proxy, where the
	// model is not known.
	Scopes []string `json:"scopes,omitempty"`

	stage    gateway.Stage
	pipeline *gateway.Pipeline
	door     gateway.Door
}

// provision looks up the app's pipeline and loads the door; the handler
// runs the pipeline up to stage.
func (h *Stage) provision(ctx caddy.Context, stage gateway.Stage) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	name := h.API
	if name == "" {
		name = "native"
	}
	d, err := llmdoor.Load(ctx, name)
	if err != nil {
		return fmt.Errorf("door %q: %w (want one of %s)", name, err, strings.Join(llmdoor.Names(), ", "))
	}
	h.stage, h.pipeline, h.door = stage, app.Pipeline(), d.Codec()
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Stage) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, ex, ok := h.pipeline.Through(w, r, h.door, h.stage)
	defer LogFields(r, ex)
	if !ok || !h.pipeline.Require(w, r, ex, h.Scopes) {
		return nil // answered
	}
	gateway.RestoreBody(r, ex) // for a handler that is not llmedge's
	return next.ServeHTTP(w, r)
}

// UnmarshalCaddyfile parses
//
//	<directive> [<matcher>] [<door>] {
//		scope <scope>...
//	}
func (h *Stage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	name := d.Val()
	if d.NextArg() {
		h.API = d.Val()
		if names := llmdoor.Names(); !slices.Contains(names, h.API) {
			return d.Errf("%s: unknown API %q (want one of %s)", name, h.API, strings.Join(names, ", "))
		}
	}
	if d.NextArg() {
		return d.Errf("%s takes one optional argument, the API: %s", name, strings.Join(llmdoor.Names(), " or "))
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "scope":
			scopes := d.RemainingArgs()
			if len(scopes) == 0 {
				return d.Errf("%s: scope: want at least one scope, e.g. model:qwen", name)
			}
			h.Scopes = append(h.Scopes, scopes...)
		default:
			return d.Errf("unrecognized %s option %q", name, d.Val())
		}
	}
	return nil
}

// Endpoint is the shape of the handlers that serve one thing of the app
// and always answer.
type Endpoint struct {
	Serve http.HandlerFunc `json:"-"`
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	e.Serve(w, r)
	return nil
}

// NoArgs parses a directive that takes neither arguments nor a block.
func NoArgs(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	name := d.Val()
	if d.NextArg() || d.NextBlock(0) {
		return d.Errf("%s takes no arguments", name)
	}
	return nil
}

// Handler is what each llmedge HTTP handler module is.
type Handler interface {
	caddyhttp.MiddlewareHandler
	caddyfile.Unmarshaler
}

// ParseCaddyfile is the directive parser of handler type T, for
// httpcaddyfile.RegisterHandlerDirective.
func ParseCaddyfile[T any, PT interface {
	*T
	Handler
}](h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := PT(new(T))
	return m, m.UnmarshalCaddyfile(h.Dispenser)
}

// LogFields adds the request's figures to Caddy's access log entry:
// model_type, replica, the balancing decision, attempts, token counts,
// time to first token, the user (the credential's subject), the API
// key's id when one was used, and the request ID (the gateway's, and the
// client's X-Request-ID when it sent one). Never secrets or
// message content. Nothing is added when the server writes no access log:
// each field added costs Caddy an allocation (it resets a cache of log
// handlers), about 3% of a request's CPU at full speed.
func LogFields(r *http.Request, ex *gateway.Exchange) {
	if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv.Logs == nil {
		return
	}
	extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields)
	if !ok || ex == nil {
		return
	}
	extra.Set(zap.String("request_id", ex.RequestID))
	if ex.ClientRequestID != "" {
		extra.Set(zap.String("client_request_id", ex.ClientRequestID)) // sanitised: short printable ASCII, no markup
	}
	if ex.Principal != nil {
		extra.Set(zap.String("user", ex.Principal.Subject))
		if ex.Principal.KeyID != "" {
			extra.Set(zap.String("api_key_id", ex.Principal.KeyID)) // the id, never the key
		}
	}
	if m := ex.Model(); m != "" {
		extra.Set(zap.String("model_type", m))
		switch {
		case ex.Adapter != "":
			extra.Set(zap.String("adapter", ex.Adapter)) // of model_type
		case ex.Chat.Asked != "":
			extra.Set(zap.String("model_alias", ex.Chat.Asked))
		}
		if ex.Rollout != "" {
			extra.Set(zap.String("rollout_model", ex.Rollout))
		}
		if ex.Fallback != "" {
			extra.Set(zap.String("fallback_model", ex.Fallback))
		}
		extra.Set(zap.Bool("stream", ex.Chat.Stream))
	}
	if ex.Attempts > 0 {
		extra.Set(zap.String("replica", ex.Replica))
		extra.Set(zap.Int("attempts", ex.Attempts))
		if len(ex.Continued) > 0 {
			// The stream went on from another replica after these many
			// tokens (one number per continuation).
			extra.Set(zap.Ints("continued_after", ex.Continued))
		}
		extra.Set(zap.String("lb_policy", ex.Policy))
		extra.Set(zap.String("lb_reason", ex.Choice.Reason))
		if ex.Choice.Cached >= 0 {
			extra.Set(zap.Float64("predicted_cached", ex.Choice.Cached))
		}
		extra.Set(zap.Int("prompt_tokens", ex.Usage.PromptTokens))
		extra.Set(zap.Int("completion_tokens", ex.Usage.CompletionTokens))
		extra.Set(zap.Duration("ttft", ex.TTFT))
		extra.Set(zap.Duration("upstream", ex.Upstream))
	}
	if ex.StreamError {
		extra.Set(zap.Bool("stream_error", true))
	}
}
