package llmedge

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/gateway"
)

// Exchange starts (or finds) the request's gateway.Exchange and returns a
// function that, when the handler is done, adds its figures to Caddy's
// access log entry for the request: model_type, replica, attempts, token
// counts, time to first token, the user (token subject) and the request
// ID. Never secrets or message content.
func Exchange(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	ex, r := gateway.Begin(w, r)
	return r, func() { addLogFields(r, ex) }
}

func addLogFields(r *http.Request, ex *gateway.Exchange) {
	extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields)
	if !ok {
		return
	}
	extra.Set(zap.String("request_id", ex.RequestID))
	if ex.Principal != nil {
		extra.Set(zap.String("user", ex.Principal.Subject))
	}
	if ex.Request != nil {
		extra.Set(zap.String("model_type", ex.Request.ModelType))
		extra.Set(zap.Bool("stream", ex.Request.Stream))
	}
	if ex.Attempts > 0 {
		extra.Set(zap.String("replica", ex.Replica))
		extra.Set(zap.Int("attempts", ex.Attempts))
		extra.Set(zap.Int("prompt_tokens", ex.Usage.PromptTokens))
		extra.Set(zap.Int("completion_tokens", ex.Usage.CompletionTokens))
		extra.Set(zap.Duration("ttft", ex.TTFT))
		extra.Set(zap.Duration("upstream", ex.Upstream))
	}
	if ex.StreamError {
		extra.Set(zap.Bool("stream_error", true))
	}
}
