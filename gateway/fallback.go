package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// NoFallbackHeader is the request header with which a client refuses its
// model's fallbacks ("1") or, when the operator turned them off by
// default, asks for them ("0").
const NoFallbackHeader = "Llmedge-No-Fallback"

// mayFallBack reports whether a request whose attempts on one model ended
// with err may go to a fallback model: no replica of that model could
// take it (none healthy, every breaker open, every one saturated past the
// queue, every one refusing connections or overloaded), the client has
// seen nothing and is still there, time is left, and neither the client
// nor the operator said no.
func (g *Gateway) mayFallBack(r *http.Request, ex *Exchange, sse *sseWriter, ctx context.Context, err error) bool {
	if ex.Adapter != "" {
		return false // another model has not the adapter: its answer would not be the one asked for
	}
	if ex.batch != nil {
		return false // a batch runs on its own model's spare capacity, which the gate measured
	}
	if !unavailable(err) || ctx.Err() != nil || r.Context().Err() != nil || (sse != nil && sse.isStarted()) {
		return false
	}
	switch strings.TrimSpace(r.Header.Get(NoFallbackHeader)) {
	case "1", "true":
		return false
	case "0", "false":
		return true
	}
	return !g.FallbackOff
}

// unavailable reports whether err says that no replica could take the
// request, rather than that one took it and failed it.
func unavailable(err error) bool {
	if errors.Is(err, pool.ErrNoReplicas) || errors.Is(err, pool.ErrSaturated) {
		return true
	}
	var be *protocols.Error
	if errors.As(err, &be) && !be.Started {
		switch be.Kind {
		case protocols.KindConnect, protocols.KindOverloaded:
			return true
		}
	}
	return false
}

// fallbackModel is the fallback named name when the request may use it:
// the credential covers it, and its limits admit the request. A fallback
// never widens what the caller may do: one it may not use is passed over.
func (g *Gateway) fallbackModel(r *http.Request, ex *Exchange, name string) *Model {
	fm := g.Models[name]
	if fm == nil || ex.Principal == nil || !ex.Principal.HasScope(auth.ModelScope(name)) {
		return nil
	}
	if p := ex.admits; p != nil {
		if err := p.admitFallback(r.Context(), ex, fm); err != nil {
			g.logger().Info("fallback model refused by its limits",
				zap.String("request_id", ex.RequestID), zap.String("model_type", ex.Chat.Model),
				zap.String("fallback", name), zap.Int("status", err.Status))
			return nil
		}
	}
	return fm
}

// FallbackChains flattens each model's fallback list (model → the models
// its configuration names) into the order requests try them: each
// fallback followed by its own chain, without repeats and without the
// model itself. A fallback that is not a model, or a cycle (a model that
// falls back, through any chain, to itself), is an error.
func FallbackChains(direct map[string][]string) (map[string][]string, error) {
	out := make(map[string][]string, len(direct))
	names := make([]string, 0, len(direct))
	for name := range direct {
		names = append(names, name)
	}
	slices.Sort(names) // the same error for the same configuration
	for _, name := range names {
		var chain []string
		seen := map[string]bool{name: true}
		var walk func(from string, path []string) error
		walk = func(from string, path []string) error {
			for _, f := range direct[from] {
				if _, ok := direct[f]; !ok {
					return fmt.Errorf("model %q: fallback %q is not a configured model", from, f)
				}
				for _, p := range path {
					if p == f {
						return fmt.Errorf("model %q: fallback cycle %s", name, strings.Join(append(path, f), " -> "))
					}
				}
				if !seen[f] {
					seen[f] = true
					chain = append(chain, f)
				}
				if err := walk(f, append(path[:len(path):len(path)], f)); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(name, []string{name}); err != nil {
			return nil, err
		}
		out[name] = chain
	}
	return out, nil
}
