package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/adapters"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// LoRA adapters: the feature lives in backends/adapters; these are the
// pipeline's calls into a model's adapters.Set. A request names
// "<model>:<adapter>", or the adapter's own name as vLLM names it: the
// name is checked when the body is read (decode), the replicas that may
// take it are chosen before each attempt (Place, which loads it on one
// when none has it), and its use is counted while an attempt runs
// (Begin).

// ResolveAdapter tells which model and adapter name names, when it names
// an adapter the model serves: "<model>:<adapter>", or the bare name of
// an adapter a model lists (or, with adapters dynamic, one a replica of
// the model has loaded). Models are looked at in name order, so a bare
// name two models share goes to the first.
func (g *Gateway) ResolveAdapter(name string) (model, adapter string, ok bool) {
	model, adapter, err := g.resolveAdapter(name)
	if err != nil || model == "" {
		return "", "", false
	}
	return model, adapter, true
}

// resolveAdapter is ResolveAdapter with the refusal of a name that asks
// a model with adapters for one it cannot take (not an identifier, or
// outside its adapter_pattern): then model and adapter are the parts of
// name, and err wraps adapters.ErrBadName.
func (g *Gateway) resolveAdapter(name string) (model, adapter string, err error) {
	if _, isModel := g.Models[name]; isModel {
		return "", "", nil
	}
	names := make([]string, 0, len(g.Models))
	for n, m := range g.Models {
		if m.Adapters != nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		ad, found := strings.CutPrefix(name, n+":")
		if !found {
			continue
		}
		switch err := g.Models[n].Adapters.Check(ad); {
		case err == nil:
			return n, ad, nil
		case errors.Is(err, adapters.ErrBadName):
			return n, ad, err
		}
	}
	for _, n := range names {
		a := g.Models[n].Adapters
		if a.Configured(name) {
			return n, name, nil
		}
		if a.Dynamic && a.Check(name) == nil {
			if _, loaded := a.Known.Holders(g.Models[n].Pool.Replicas(), name); len(loaded) > 0 {
				return n, name, nil
			}
		}
	}
	return "", "", nil
}

// AcceptsName reports whether name is a model name the gateway resolves
// beyond its models and aliases (an adapter), for the doors; a bad
// adapter name of a model with adapters passes, for the pipeline to
// refuse naming the problem.
func (g *Gateway) AcceptsName(name string) bool {
	model, _, _ := g.resolveAdapter(name)
	return model != ""
}

// noAdapter ends the use of no adapter.
func noAdapter() {}

// badAdapter is the 400 of a request whose adapter name model refuses.
func badAdapter(model, adapter string, err error) *api.Error {
	if len(adapter) > 64 {
		adapter = adapter[:64] + "…"
	}
	e := api.NewError(http.StatusBadRequest, fmt.Sprintf("Adapter %q of model '%s' is refused: %v", adapter, model, err))
	e.Code, e.Param = "invalid_adapter_name", "model"
	return e
}

// adapterError is what the client sees of a refusal by the adapters'
// bounds, nil for any other error.
func adapterError(model string, err error) *api.Error {
	var full *adapters.SlotsFullError
	var tenant *adapters.TenantLimitError
	switch {
	case errors.As(err, &full):
		return api.NewError(http.StatusServiceUnavailable, fmt.Sprintf(
			"LoRA adapter slots full: every replica of model '%s' holds %d adapters that are in use or were used lately; retry later",
			model, full.Cap)).WithHeader("Retry-After", retryAfter(full.RetryAfter))
	case errors.As(err, &tenant):
		e := api.NewError(http.StatusTooManyRequests, fmt.Sprintf(
			"Too many LoRA adapter loads: a credential may have at most %d adapters of model '%s' loaded per %s; retry later",
			tenant.Loads, model, tenant.Window)).WithHeader("Retry-After", retryAfter(tenant.RetryAfter))
		e.Code = "rate_limit_exceeded"
		return e
	case errors.Is(err, adapters.ErrBadName):
		return api.NewError(http.StatusBadRequest, "The adapter of model '"+model+"' was refused: "+err.Error())
	}
	return nil
}

// placeAdapter tells the replicas of m that may not take the request for
// its adapter (adapters.Set.Place).
func (g *Gateway) placeAdapter(ctx context.Context, m *Model, ex *Exchange, tried []*pool.Replica) ([]*pool.Replica, error) {
	client := m.Client
	if client == nil {
		client = g.Client
	}
	h := &adapters.Host{Model: m.Name, Client: client, Key: m.apiKey, Logger: g.logger()}
	if g.Metrics != nil {
		h.Observer = g.Metrics
	}
	tenant := ""
	if ex.Principal != nil {
		tenant = ex.Principal.Subject
	}
	return m.Adapters.Place(ctx, h, tenant, ex.Adapter, m.Pool.Replicas(), tried)
}

// adapterLabel is the request's adapter as the metrics name it: bounded
// to the configured and loaded ones.
func (g *Gateway) adapterLabel(ex *Exchange) string {
	if ex.Adapter == "" {
		return ""
	}
	if m := g.Models[ex.Chat.Model]; m != nil && m.Adapters != nil {
		return m.Adapters.Label(ex.Adapter)
	}
	return adapters.Other
}

// AdapterScope is the scope that covers only adapter of model; the
// model's own scope covers all of its adapters.
func AdapterScope(model, adapter string) string { return auth.ModelScope(model + ":" + adapter) }

// coversAdapter reports whether p may use adapter of model.
func coversAdapter(p *auth.Principal, model, adapter string) bool {
	return p.HasScope(auth.ModelScope(model)) || p.HasScope(AdapterScope(model, adapter))
}

// adapterScopeModel reports whether scope is the scope of one adapter of
// a model ("model:<model>:<adapter>").
func (g *Gateway) adapterScopeModel(scope string) bool {
	name, ok := strings.CutPrefix(scope, auth.ScopePrefix)
	if !ok {
		return false
	}
	model, adapter, ok := g.ResolveAdapter(name)
	return ok && name == model+":"+adapter
}

// adapterGone reports whether err is the replica saying the model asked
// for does not exist there: the adapter left it (the engine restarted, or
// someone unloaded it).
func adapterGone(err error) bool {
	var be *protocols.Error
	return errors.As(err, &be) && be.Status == http.StatusNotFound
}

// adapterRole leads the messages the routing policy sees of an adapter's
// request: no message of a client has it (the doors accept only chat
// roles), so the prefix index keys an adapter's prompts apart from the
// base model's and other adapters' — their KV caches are not shared.
const adapterRole = "\x00lora"

// adapterKeyed is msgs led by a message naming adapter, for the policy.
func adapterKeyed(msgs []api.Message, adapter string) []api.Message {
	out := make([]api.Message, 0, len(msgs)+1)
	out = append(out, api.Message{Role: adapterRole, Content: adapter})
	return append(out, msgs...)
}

// alias is the alias of the model the request named, "" when it named
// the model or one of its adapters.
func (ex *Exchange) alias() string {
	if ex.Adapter != "" {
		return ""
	}
	return ex.Chat.Asked
}

// ReplicaKey is the API key the gateway sends r (its own, or the
// model's), for the fleet's reads of its model list.
func (m *Model) ReplicaKey(r *pool.Replica) string { return m.apiKey(r) }

// AdapterNames are the adapters p may use, as "<model>:<adapter>", for a
// model list: the adapters each model lists and, with adapters dynamic,
// the others its replicas have loaded; by model, then adapter.
func (g *Gateway) AdapterNames(p *auth.Principal) []string {
	if p == nil {
		return nil
	}
	var out []string
	models := make([]string, 0, len(g.Models))
	for n, m := range g.Models {
		if m.Adapters != nil {
			models = append(models, n)
		}
	}
	slices.Sort(models)
	for _, n := range models {
		m := g.Models[n]
		names := slices.Clone(m.Adapters.Names)
		if m.Adapters.Dynamic {
			for _, r := range m.Pool.Replicas() {
				for _, ad := range m.Adapters.Known.View(r.URL).Loaded {
					if !slices.Contains(names, ad) && m.Adapters.Check(ad) == nil {
						names = append(names, ad)
					}
				}
			}
		}
		slices.Sort(names)
		for _, ad := range names {
			if coversAdapter(p, n, ad) {
				out = append(out, n+":"+ad)
			}
		}
	}
	return out
}

// CoversName reports whether name names an adapter that p may use.
func (g *Gateway) CoversName(p *auth.Principal, name string) bool {
	model, adapter, ok := g.ResolveAdapter(name)
	return ok && p != nil && coversAdapter(p, model, adapter)
}
