package llmapp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/health"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/modules/llmpolicy"
	"github.com/llmedge/llmedge/modules/llmsource"
	"github.com/llmedge/llmedge/pool"
	"github.com/llmedge/llmedge/protocols"
	"github.com/llmedge/llmedge/routing"
)

// Defaults of the guest modules a model block may name.
const (
	DefaultProtocol = "openai"
	DefaultPolicy   = "prefix_cache"
	DefaultSource   = "static"
)

// Namespaces of the guest modules a model block loads.
const (
	policyNamespace   = "llmedge.policies"
	protocolNamespace = "llmedge.protocols"
)

// modelDeps is what building a model takes from the app.
type modelDeps struct {
	ctx     caddy.Context
	repl    *caddy.Replacer
	logger  *zap.Logger
	client  *http.Client
	consul  discovery.ConsulConfig
	metrics *metrics.Metrics
}

// builtModel is a model ready to serve, with what the app runs for it.
type builtModel struct {
	*gateway.Model
	// probe is its active health probing, nil when off.
	probe *health.Target
	// syncer is its replica source when that answers later (Consul).
	syncer llmsource.Syncer
	// scraper reads its replicas' own load, nil when off.
	scraper *loadScraper
	// close ends its watch of replicas.
	close []func()
}

// build turns the configuration into a model ready to serve. It is the
// one place a model is assembled: its guest modules (policy, protocols,
// source), its pool, probes, client and timeouts.
func (mc *ModelConfig) build(d *modelDeps) (_ *builtModel, err error) {
	if err := mc.validate(); err != nil {
		return nil, err
	}
	b := &builtModel{}
	defer func() {
		if err != nil {
			b.Close() // a half-built model lets go of its watch and breakers
		}
	}()
	policyLabel := policyName(mc) // before loading it: Caddy clears PolicyRaw then
	policy, err := mc.policy(d.ctx)
	if err != nil {
		return nil, err
	}
	backendsByName, proto, err := mc.protocols(d.ctx)
	if err != nil {
		return nil, err
	}
	apiKey, err := mc.apiKey(d.repl)
	if err != nil {
		return nil, err
	}
	p := mc.newPool(policy, d.logger)
	b.close = append(b.close, p.Close)
	b.Model = &gateway.Model{
		Name:           mc.Name,
		Pool:           p,
		Policy:         policyLabel,
		Protocols:      backendsByName,
		Protocol:       proto,
		UpstreamModel:  mc.UpstreamModel,
		SystemMessage:  mc.SystemMessage,
		MaxTokens:      mc.MaxTokens,
		StreamUpstream: mc.StreamUpstream == StreamUpstreamAlways,
		APIKey:         apiKey,
		MaxAttempts:    mc.MaxAttempts,
		TryDuration:    time.Duration(mc.TryDuration),
		Timeouts: gateway.Timeouts{
			FirstToken: time.Duration(mc.FirstTokenTimeout),
			Idle:       time.Duration(mc.IdleTimeout),
			Total:      time.Duration(mc.TotalTimeout),
			Response:   time.Duration(mc.ResponseTimeout),
		},
	}
	if mc.DialTimeout > 0 {
		b.Client = newReplicaClient(time.Duration(mc.DialTimeout))
	}
	if err := mc.watchReplicas(d, b); err != nil {
		return nil, err
	}
	b.scraper = mc.newLoadScraper(b, d.logger, d.metrics.ScrapeError)
	return b, nil
}

// Close ends the model's watch of its replicas and lets go of its pool's
// breakers and connections.
func (b *builtModel) Close() {
	for i := len(b.close) - 1; i >= 0; i-- {
		b.close[i]()
	}
	b.close = nil
	if b.Model != nil && b.Client != nil {
		b.Client.CloseIdleConnections()
	}
}

// policy loads the model's balancing policy (a guest module).
func (mc *ModelConfig) policy(ctx caddy.Context) (pool.Policy, error) {
	if mc.PolicyRaw == nil {
		mc.PolicyRaw = moduleObject("policy", DefaultPolicy)
	}
	mod, err := loadGuest(ctx, mc, "PolicyRaw", mc.PolicyRaw, "lb_policy", policyNamespace, "policy")
	if err != nil {
		return nil, err
	}
	policy, ok := mod.(pool.Policy)
	if !ok {
		return nil, fmt.Errorf("lb_policy: module %T is not a pool.Policy", mod)
	}
	if b, ok := mod.(llmpolicy.ModelBound); ok {
		if err := b.BindModel(mc.Name); err != nil {
			return nil, err
		}
	}
	if a := mc.Affinity; a != nil {
		key := routing.ByUser
		switch a.By {
		case "header":
			key = routing.ByHeader(a.Name)
		case "cookie":
			key = routing.ByCookie(a.Name)
		}
		policy = &routing.Affinity{Key: key, Inner: policy, LoadFactor: a.LoadFactor}
	}
	return policy, nil
}

// policyName is the name of the model's policy module, with its session
// affinity when there is one.
func policyName(mc *ModelConfig) string {
	var head struct {
		Policy string `json:"policy"`
	}
	if err := json.Unmarshal(mc.PolicyRaw, &head); err != nil || head.Policy == "" {
		head.Policy = DefaultPolicy // none configured
	}
	if mc.Affinity != nil {
		return head.Policy + "+affinity"
	}
	return head.Policy
}

// protocols loads the model's protocol and every other registered one, so
// that a replica may name any (its "<protocol>+" URL prefix, Consul Meta).
func (mc *ModelConfig) protocols(ctx caddy.Context) (map[string]protocols.Protocol, string, error) {
	if mc.ProtocolRaw == nil {
		mc.ProtocolRaw = moduleObject("protocol", DefaultProtocol)
	}
	mod, err := loadGuest(ctx, mc, "ProtocolRaw", mc.ProtocolRaw, "protocol", protocolNamespace, "protocol")
	if err != nil {
		return nil, "", err
	}
	byName := map[string]protocols.Protocol{}
	def, ok := mod.(protocols.Protocol)
	if !ok {
		return nil, "", fmt.Errorf("protocol: module %T is not a protocols.Protocol", mod)
	}
	name := mod.(caddy.Module).CaddyModule().ID.Name()
	byName[name] = def
	for _, info := range caddy.GetModules(protocolNamespace) {
		other := info.ID.Name()
		if other == name {
			continue
		}
		m, err := ctx.LoadModuleByID(string(info.ID), nil)
		if err != nil {
			return nil, "", fmt.Errorf("protocol %s: %w", other, err)
		}
		if be, ok := m.(protocols.Protocol); ok {
			byName[other] = be
		}
	}
	return byName, name, nil
}

func (mc *ModelConfig) newPool(policy pool.Policy, logger *zap.Logger) *pool.Pool {
	qlen, qtimeout := mc.Queue.options()
	// Breakers are shared by model, replica URL and settings across config
	// reloads (see pool's registry); Close lets go of them.
	name := mc.Name
	return pool.NewWithOptions(mc.Name, policy, pool.Options{
		Breaker:      mc.Breaker.settings(),
		QueueLength:  qlen,
		QueueTimeout: qtimeout,
		QueueOrder:   mc.Queue.order(),
		OnBreakerChange: func(replica string, from, to pool.BreakerState) {
			log := logger.Info
			if to == pool.StateOpen {
				log = logger.Warn
			}
			log("replica circuit breaker "+to.String(), zap.String("model_type", name),
				zap.String("replica", replica), zap.String("from", from.String()))
		},
	})
}

// watchReplicas opens the model's replica source (a guest module) and
// feeds its pool from it.
func (mc *ModelConfig) watchReplicas(d *modelDeps, b *builtModel) error {
	if mc.SourceRaw == nil {
		mc.SourceRaw = moduleObject("source", DefaultSource)
	}
	mod, err := loadGuest(d.ctx, mc, "SourceRaw", mc.SourceRaw, "source", llmsource.Namespace, "source")
	if err != nil {
		return err
	}
	src, ok := mod.(llmsource.Source)
	if !ok {
		return fmt.Errorf("source: module %T is not an llmsource.Source", mod)
	}
	logger := d.logger.With(zap.String("model_type", mc.Name))
	ds, closeSource, err := src.Open(llmsource.Env{Model: mc.Name, Consul: d.consul, Logger: logger})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	unsubscribe := ds.Subscribe(func(list []discovery.Instance) {
		b.Pool.Set(mc.replicas(list, b.Protocols, logger))
	})
	b.close = append(b.close, closeSource, unsubscribe)
	b.Discovery = ds.Status
	if s, ok := ds.(llmsource.Syncer); ok {
		b.syncer = s
	}
	if ac, ok := src.(llmsource.ActiveChecked); ok && ac.ActiveHealthChecks() && mc.HealthInterval >= 0 {
		b.probe = &health.Target{
			Pool: b.Pool, Path: func(r *pool.Replica) string { return b.Engine(r).HealthPath },
			Interval: time.Duration(mc.HealthInterval), Timeout: time.Duration(mc.HealthTimeout),
		}
	}
	return nil
}

// replicas converts instances to pool replicas: instance settings
// (protocol, upstream model, weight, max_concurrency) override the
// model's. An instance naming an unknown protocol is left out, logged.
func (mc *ModelConfig) replicas(list []discovery.Instance, known map[string]protocols.Protocol, logger *zap.Logger) []*pool.Replica {
	out := make([]*pool.Replica, 0, len(list))
	for _, in := range list {
		r, err := pool.NewReplica(in.URL)
		if err != nil {
			logger.Warn("replica skipped", zap.String("id", in.ID), zap.Error(err))
			continue
		}
		if _, ok := known[in.Protocol]; in.Protocol != "" && !ok {
			logger.Warn("replica skipped: unknown protocol", zap.String("id", in.ID), zap.String("protocol", in.Protocol))
			continue
		}
		r.Model, r.Protocol, r.Weight = in.Model, in.Protocol, in.Weight
		r.MaxConcurrency = mc.MaxConcurrency
		if in.MaxConcurrency > 0 {
			r.MaxConcurrency = in.MaxConcurrency
		}
		out = append(out, r)
	}
	return out
}
