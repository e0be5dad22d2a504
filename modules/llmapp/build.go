package llmapp

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/fleet"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/scrape"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmdialect"
	"github.com/llmedge/llmedge/modules/llmpolicy"
	"github.com/llmedge/llmedge/modules/llmsource"
	"github.com/llmedge/llmedge/routing/share"
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
	ctx    caddy.Context
	repl   *caddy.Replacer
	logger *zap.Logger
	consul discovery.ConsulConfig
	// dialects are the engines' load metrics (guest modules), by name.
	dialects map[string]scrape.Dialect
	// share passes routing decisions between instances; nil for none.
	share *share.Hub
	// limits are the app's body limits (with defaults), and doors the
	// doors' (the largest of any model's): see applyModelLimits.
	limits, doors api.Limits
}

// buildFleet resolves every model's guest modules and hands the models to
// the fleet, which runs their replicas.
func (a *App) buildFleet(ctx caddy.Context, repl *caddy.Replacer) (*fleet.Fleet, error) {
	dialects, err := llmdialect.All(ctx)
	if err != nil {
		return nil, err
	}
	d := &modelDeps{ctx: ctx, repl: repl, logger: a.logger, consul: a.Consul.resolved(), dialects: dialects, share: a.share,
		limits: a.Limits.WithDefaults(), doors: a.doorLimits()}
	specs := make([]fleet.Spec, 0, len(a.Models))
	closeAll := func() {
		for _, s := range specs {
			if s.Close != nil {
				s.Close()
			}
		}
	}
	for _, mc := range a.Models {
		s, err := mc.spec(d)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("model %q: %w", mc.Name, err)
		}
		specs = append(specs, s)
	}
	return fleet.New(specs, fleet.Options{Client: a.client, Logger: a.logger, Dialects: dialects,
		OnScrapeError: a.metrics.ScrapeError, SyncTimeout: a.Consul.syncTimeout()})
}

// spec turns the configuration into a model ready to serve. It is the
// one place a model is assembled: its guest modules (policy, protocols,
// source), its pool's options, probes, client and timeouts.
func (mc *ModelConfig) spec(d *modelDeps) (fleet.Spec, error) {
	if err := mc.validate(); err != nil {
		return fleet.Spec{}, err
	}
	policyLabel := policyName(mc) // before loading it: Caddy clears PolicyRaw then
	policy, err := mc.policy(d)
	if err != nil {
		return fleet.Spec{}, err
	}
	byName, proto, err := mc.protocols(d.ctx)
	if err != nil {
		return fleet.Spec{}, err
	}
	apiKey, err := mc.apiKey(d.repl)
	if err != nil {
		return fleet.Spec{}, err
	}
	m := &gateway.Model{
		Name:           mc.Name,
		Required:       mc.Required,
		Policy:         policyLabel,
		Protocols:      byName,
		Protocol:       proto,
		UpstreamModel:  mc.UpstreamModel,
		SystemMessage:  mc.SystemMessage,
		MaxTokens:      mc.MaxTokens,
		Caps:           mc.CapsConfig.caps(reserve.DefaultMaxGenerations),
		StreamUpstream: mc.StreamUpstream == StreamUpstreamAlways,
		APIKey:         apiKey,
		MaxAttempts:    mc.MaxAttempts,
		Continuations:  mc.Continuations,
		TryDuration:    time.Duration(mc.TryDuration),
		Timeouts: gateway.Timeouts{
			FirstToken: time.Duration(mc.FirstTokenTimeout),
			Idle:       time.Duration(mc.IdleTimeout),
			Total:      time.Duration(mc.TotalTimeout),
			Response:   time.Duration(mc.ResponseTimeout),
		},
	}
	if mc.DialTimeout > 0 {
		m.Client = newReplicaClient(time.Duration(mc.DialTimeout))
	}
	mc.applyModelLimits(m, d.limits, d.doors)
	m.EnginePriority = slices.Clone(mc.EnginePriority)
	if mc.EngineFair {
		m.EngineFair = gateway.NewEngineShares()
	}
	m.Adapters = mc.Adapters.build()
	if err := mc.applyBoundary(m); err != nil {
		return fleet.Spec{}, err
	}
	qlen, qtimeout := mc.Queue.options()
	s := fleet.Spec{
		Model:  m,
		Policy: policy,
		// Breakers are shared by model, replica URL and settings across
		// config reloads; the fleet lets go of them when it closes.
		PoolOptions: pool.Options{Breaker: mc.Breaker.settings(), QueueLength: qlen, QueueTimeout: qtimeout,
			QueueOrder: mc.Queue.order(), Kept: kept, Slow: mc.SlowReplicas.settings()},
		MaxConcurrency: mc.MaxConcurrency,
		Load:           mc.load(),
	}
	mc.Queue.shedOptions(&s.PoolOptions)
	if l := s.Load; l != nil && l.Dialect != "" {
		if _, ok := d.dialects[l.Dialect]; !ok {
			return fleet.Spec{}, fmt.Errorf("load_metrics: unknown dialect %q (want one of %s)", l.Dialect, llmdialect.Names(d.dialects))
		}
	}
	if err := mc.source(d, &s); err != nil {
		return fleet.Spec{}, err
	}
	keepAdapters(mc.Name, &s)
	return s, nil
}

// load is the scrape of the replicas' own load; nil when turned off.
func (mc *ModelConfig) load() *fleet.Load {
	cfg := LoadMetricsConfig{}
	if mc.LoadMetrics != nil {
		cfg = *mc.LoadMetrics
	}
	if cfg.Disabled {
		return nil
	}
	return &fleet.Load{Interval: time.Duration(cfg.Interval), Timeout: time.Duration(cfg.Timeout),
		Path: cfg.Path, Dialect: cfg.Dialect}
}

// policy loads the model's balancing policy (a guest module).
func (mc *ModelConfig) policy(d *modelDeps) (pool.Policy, error) {
	ctx := d.ctx
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
	if b, ok := mod.(llmpolicy.Bound); ok {
		if err := b.Bind(llmpolicy.Env{Model: mc.Name, Kept: kept, Share: d.share}); err != nil {
			return nil, err
		}
	}
	return policy, nil
}

// policyName is the name of the model's policy module; a wrapper (session
// affinity) is named after the policy it wraps.
func policyName(mc *ModelConfig) string {
	return rawPolicyName(mc.PolicyRaw, DefaultPolicy)
}

func rawPolicyName(raw json.RawMessage, def string) string {
	var head struct {
		Policy string          `json:"policy"`
		Inner  json.RawMessage `json:"inner"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Policy == "" {
		return def // none configured
	}
	if head.Policy == "affinity" {
		return rawPolicyName(head.Inner, llmpolicy.DefaultInner) + "+affinity"
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

// source opens the model's replica source (a guest module) and says
// whether its replicas are probed.
func (mc *ModelConfig) source(d *modelDeps, s *fleet.Spec) error {
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
	ds, closeSource, err := src.Open(llmsource.Env{Model: mc.Name, Consul: d.consul, Logger: logger, Kept: kept})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	s.Source, s.Close = ds, closeSource
	switch ac, ok := src.(llmsource.ActiveChecked); {
	case mc.HealthInterval < 0:
	case ok && ac.ActiveHealthChecks():
		s.Probe = &fleet.Probe{Interval: time.Duration(mc.HealthInterval), Timeout: time.Duration(mc.HealthTimeout)}
	default:
		// The source checks their health; a replica its breaker took out
		// is probed all the same, to be readmitted once it answers.
		s.Probe = &fleet.Probe{Timeout: time.Duration(mc.HealthTimeout), OutOnly: true}
	}
	return nil
}
