package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// LoRA adapters. A model whose replicas (vLLM with --enable-lora) serve
// adapters on top of its weights takes requests for "<model>:<adapter>",
// or for the adapter's own name as vLLM names it: such a request goes to
// a replica that has the adapter loaded, one whose requests use it right
// now first, and is sent to it with the adapter's name as its model. When
// no replica has it, the gateway loads it on one (vLLM's
// /v1/load_lora_adapter), once however many requests wait for it.

// Adapters configures a model's LoRA adapters.
type Adapters struct {
	// Names are the adapters requests may name. With Dynamic, any name
	// is accepted and Names only add bare names (without "<model>:").
	Names   []string
	Dynamic bool
	// Path makes the lora_path of an adapter the gateway loads: "{adapter}"
	// in it is replaced by the adapter's name. "" sends the name itself.
	Path string
	// Cap is the most adapters the gateway lets one replica hold before it
	// looks elsewhere to load one (the engine's --max-cpu-loras); 0 means
	// DefaultAdapterCap.
	Cap int
	// LoadTimeout bounds one load; 0 means DefaultAdapterLoadTimeout.
	LoadTimeout time.Duration
	// Known is what the gateway knows of each replica's adapters, fed by
	// the fleet from the engines' model lists and metrics.
	Known *pool.Adapters
	// loads makes concurrent first requests for an adapter share one
	// load.
	loads singleflight.Group
}

// Defaults of Adapters.
const (
	DefaultAdapterCap         = 4
	DefaultAdapterLoadTimeout = 2 * time.Minute
	// MaxAdapterName bounds an adapter's name.
	MaxAdapterName = 256
)

// ValidAdapterName reports whether name may name an adapter: printable,
// no spaces, at most MaxAdapterName bytes.
func ValidAdapterName(name string) bool {
	if name == "" || len(name) > MaxAdapterName {
		return false
	}
	for _, r := range name {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// allows reports whether requests may name adapter.
func (a *Adapters) allows(adapter string) bool {
	return ValidAdapterName(adapter) && (a.Dynamic || slices.Contains(a.Names, adapter))
}

// ResolveAdapter tells which model and adapter name names, when it names
// an adapter: "<model>:<adapter>" for a model with adapters that allows
// it, or the bare name of an adapter a model lists (or, with adapters
// dynamic, one a replica of the model has loaded). Models are looked at
// in name order, so a bare name two models share goes to the first.
func (g *Gateway) ResolveAdapter(name string) (model, adapter string, ok bool) {
	if _, isModel := g.Models[name]; isModel {
		return "", "", false
	}
	names := make([]string, 0, len(g.Models))
	for n, m := range g.Models {
		if m.Adapters != nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if ad, found := strings.CutPrefix(name, n+":"); found && g.Models[n].Adapters.allows(ad) {
			return n, ad, true
		}
	}
	for _, n := range names {
		a := g.Models[n].Adapters
		if slices.Contains(a.Names, name) {
			return n, name, true
		}
		if a.Dynamic && ValidAdapterName(name) {
			if _, loaded := a.Known.Holders(g.Models[n].Pool.Replicas(), name); len(loaded) > 0 {
				return n, name, true
			}
		}
	}
	return "", "", false
}

// AcceptsName reports whether name is a model name the gateway resolves
// beyond its models and aliases (an adapter), for the doors.
func (g *Gateway) AcceptsName(name string) bool {
	_, _, ok := g.ResolveAdapter(name)
	return ok
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

// ErrAdapterUnavailable: no replica has the adapter and none could load
// it (every one at its cap, or the loads failed). It is an
// pool.ErrNoReplicas, answered 503.
var ErrAdapterUnavailable = fmt.Errorf("%w: no replica has the adapter or can load it", pool.ErrNoReplicas)

// adapterExclude extends tried with the replicas of m that should not
// take a request for adapter: those without it, and, when some replica
// whose requests use it right now can take it, those that merely have it
// loaded. When no replica has it, it is loaded on one first.
func (g *Gateway) adapterExclude(ctx context.Context, m *Model, adapter string, tried []*pool.Replica) ([]*pool.Replica, error) {
	a := m.Adapters
	all := m.Pool.Replicas()
	usable := pool.Usable(all, tried)
	running, loaded := a.Known.Holders(usable, adapter)
	var keep []*pool.Replica
	for _, r := range running {
		if !r.Full() {
			keep = running
			break
		}
	}
	if keep == nil {
		keep = loaded
	}
	if len(keep) == 0 {
		r, err := g.loadAdapter(ctx, m, adapter, usable)
		if err != nil {
			return nil, err
		}
		keep = []*pool.Replica{r}
	}
	out := slices.Clone(tried)
	for _, r := range all {
		if !slices.Contains(keep, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// loadAdapter loads adapter on one of candidates and returns it. Every
// request that finds the adapter nowhere at the same time shares the one
// load: the first picks the replica, the others wait for it. The load
// runs to its end even when the requests waiting for it leave, bounded by
// the load timeout alone, so that it is not repeated.
func (g *Gateway) loadAdapter(ctx context.Context, m *Model, adapter string, candidates []*pool.Replica) (*pool.Replica, error) {
	a := m.Adapters
	ch := a.loads.DoChan(adapter, func() (any, error) {
		// Another request's load may have finished meanwhile.
		if _, loaded := a.Known.Holders(pool.Usable(m.Pool.Replicas(), nil), adapter); len(loaded) > 0 {
			return loaded[0], nil
		}
		limit := a.EffectiveCap()
		var lastErr error
		tried := 0
		// At most two replicas are asked: a load that fails on both says
		// more about the adapter than about the replicas.
		for r := a.Known.LoadTarget(candidates, limit); r != nil && tried < 2; r = a.Known.LoadTarget(candidates, limit) {
			tried++
			err := g.postLoad(m, r, adapter)
			g.countAdapterLoad(m, adapter, err)
			if err == nil {
				a.Known.MarkLoaded(r.URL, adapter)
				g.logger().Info("LoRA adapter loaded", zap.String("model_type", m.Name),
					zap.String("adapter", adapter), zap.String("replica", r.URL))
				return r, nil
			}
			g.logger().Warn("LoRA adapter load failed", zap.String("model_type", m.Name),
				zap.String("adapter", adapter), zap.String("replica", r.URL), zap.Error(err))
			lastErr = err
			candidates = slices.DeleteFunc(slices.Clone(candidates), func(x *pool.Replica) bool { return x == r })
		}
		if lastErr != nil {
			return nil, fmt.Errorf("%w: %w", ErrAdapterUnavailable, lastErr)
		}
		return nil, ErrAdapterUnavailable
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*pool.Replica), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// postLoad asks r to load adapter (vLLM's runtime LoRA update). An
// adapter already loaded there (vLLM's 400 saying so) is loaded.
func (g *Gateway) postLoad(m *Model, r *pool.Replica, adapter string) error {
	a := m.Adapters
	timeout := a.LoadTimeout
	if timeout <= 0 {
		timeout = DefaultAdapterLoadTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	path := adapter
	if a.Path != "" {
		path = strings.ReplaceAll(a.Path, "{adapter}", adapter)
	}
	body, _ := json.Marshal(map[string]string{"lora_name": adapter, "lora_path": path})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+"/v1/load_lora_adapter", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("load adapter: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key := m.apiKey(r); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	client := m.Client
	if client == nil {
		client = g.Client
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("load adapter: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusBadRequest && bytes.Contains(msg, []byte("already been loaded")):
		return nil
	}
	return fmt.Errorf("load adapter: replica answered %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
}

// adapterGone reports whether err is the replica saying the model asked
// for does not exist there: the adapter left it (the engine restarted, or
// someone unloaded it).
func adapterGone(err error) bool {
	var be *protocols.Error
	return errors.As(err, &be) && be.Status == http.StatusNotFound
}

// countAdapterLoad records a load in the metrics.
func (g *Gateway) countAdapterLoad(m *Model, adapter string, err error) {
	if g.Metrics != nil {
		g.Metrics.AdapterLoad(m.Name, adapter, err == nil)
	}
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

// EffectiveCap is the most adapters the gateway has one replica hold.
func (a *Adapters) EffectiveCap() int {
	if a.Cap <= 0 {
		return DefaultAdapterCap
	}
	return a.Cap
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
					if !slices.Contains(names, ad) && ValidAdapterName(ad) {
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
