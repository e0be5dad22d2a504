package llmapp

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/modules/llmdialect"
	"github.com/llmedge/llmedge/modules/llmpolicy"
	"github.com/llmedge/llmedge/modules/llmsource"
)

// This file parses a `model <name> { ... }` block of the llmedge global
// option and the blocks nested in it; caddyfile.go parses the rest.

func (m *ModelConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.Errf("model: want a name")
	}
	m.Name = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	// The static and consul_* lines are shorthands for a source module.
	var static *llmsource.Static
	var consul *llmsource.Consul
	var affinity *llmpolicy.Affinity
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "static":
			if d.CountRemainingArgs() == 0 {
				return d.Errf("static: want at least one replica URL")
			}
			if static == nil {
				static = new(llmsource.Static)
			}
			err = static.ParseReplicas(d)
		case "weight":
			if static == nil {
				static = new(llmsource.Static)
			}
			err = static.ParseWeight(d)
		case "consul_service", "consul_tag", "consul_filter", "consul_datacenter", "consul_token":
			if consul == nil {
				consul = new(llmsource.Consul)
			}
			dst := map[string]*string{"consul_service": &consul.Service, "consul_tag": &consul.Tag,
				"consul_filter": &consul.Filter, "consul_datacenter": &consul.Datacenter, "consul_token": &consul.Token}[opt]
			err = oneString(d, dst)
		case "source":
			m.SourceRaw, err = guestModule(d, "source", llmsource.Namespace, "source")
		case "protocol":
			m.ProtocolRaw, err = guestModule(d, "protocol", protocolNamespace, "protocol")
		case "lb_policy":
			m.PolicyRaw, err = guestModule(d, "lb_policy", policyNamespace, "policy")
		case "affinity":
			// The affinity policy around the model's lb_policy, wrapped
			// once the whole block is read.
			affinity = new(llmpolicy.Affinity)
			err = affinity.UnmarshalCaddyfile(d.NewFromNextSegment())
		case "load_metrics":
			m.LoadMetrics = new(LoadMetricsConfig)
			err = m.LoadMetrics.unmarshalCaddyfile(d)
		case "upstream_model":
			err = oneString(d, &m.UpstreamModel)
		case "system_message":
			err = oneString(d, &m.SystemMessage)
		case "max_tokens":
			err = positiveInt(d, opt, &m.MaxTokens)
		case "max_body_size":
			err = bodySize(d, &m.MaxBodyBytes)
		case "max_messages":
			err = positiveInt(d, opt, &m.MaxMessages)
		case "max_generations", "max_prompt_tokens":
			_, err = parseCapsOption(d, "model "+m.Name, opt, &m.CapsConfig)
		case "price":
			m.Price, err = parsePrice(d)
		case "api_key":
			err = oneString(d, &m.APIKey)
		case "api_key_env":
			err = oneString(d, &m.APIKeyEnv)
		case "health_interval":
			var s string
			if err = oneString(d, &s); err == nil {
				if s == "off" {
					m.HealthInterval = -1
				} else if v, perr := caddy.ParseDuration(s); perr != nil || v <= 0 {
					err = d.Errf("health_interval %q: want a positive duration or off", s)
				} else {
					m.HealthInterval = caddy.Duration(v)
				}
			}
		case "health_timeout":
			err = positiveDuration(d, opt, &m.HealthTimeout)
		case "max_concurrency":
			err = positiveInt(d, opt, &m.MaxConcurrency)
		case "first_token_timeout":
			err = positiveDuration(d, opt, &m.FirstTokenTimeout)
		case "idle_timeout":
			err = positiveDuration(d, opt, &m.IdleTimeout)
		case "total_timeout":
			err = positiveDuration(d, opt, &m.TotalTimeout)
		case "response_timeout":
			err = positiveDuration(d, opt, &m.ResponseTimeout)
		case "stream_upstream":
			if err = oneString(d, &m.StreamUpstream); err == nil && m.StreamUpstream != StreamUpstreamAuto && m.StreamUpstream != StreamUpstreamAlways {
				err = d.Errf("stream_upstream: want auto or always, got %q", m.StreamUpstream)
			}
		case "anthropic":
			if err = oneString(d, &m.Anthropic); err == nil && m.Anthropic != "auto" && m.Anthropic != "passthrough" && m.Anthropic != "translate" {
				err = d.Errf("anthropic: want auto, passthrough or translate, got %q", m.Anthropic)
			}
		case "responses":
			if err = oneString(d, &m.Responses); err == nil && m.Responses != "auto" && m.Responses != "passthrough" && m.Responses != "translate" {
				err = d.Errf("responses: want auto, passthrough or translate, got %q", m.Responses)
			}
		case "dial_timeout":
			err = positiveDuration(d, opt, &m.DialTimeout)
		case "max_attempts":
			err = positiveInt(d, opt, &m.MaxAttempts)
		case "continue":
			err = continueOption(d, &m.Continuations)
		case "try_duration":
			err = positiveDuration(d, opt, &m.TryDuration)
		case "breaker":
			m.Breaker = new(BreakerConfig)
			err = m.Breaker.unmarshalCaddyfile(d)
		case "queue":
			m.Queue = new(QueueConfig)
			err = m.Queue.unmarshalCaddyfile(d)
		case "engine_priority":
			err = enginePriorityOption(d, &m.EnginePriority, &m.EngineFair)
		case "slow_replicas":
			m.SlowReplicas = new(SlowReplicasConfig)
			err = m.SlowReplicas.unmarshalCaddyfile(d)
		case "limits":
			var l limits.Limit
			l, err = parseLimits(d, "limits of model "+m.Name, nil)
			m.RateLimits = &l
		case "alias":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("alias: want at least one name for model %q", m.Name)
			}
			m.Aliases = append(m.Aliases, args...)
		case "rollout":
			args := d.RemainingArgs()
			if len(args) == 0 || len(args)%2 != 0 {
				return d.Errf("rollout: want <model> <weight> [<model> <weight>...] for model %q", m.Name)
			}
			for i := 0; i < len(args); i += 2 {
				w, perr := strconv.Atoi(args[i+1])
				if perr != nil || w <= 0 {
					return d.Errf("rollout: weight of %q: want a positive integer, got %q", args[i], args[i+1])
				}
				m.Rollout = append(m.Rollout, RolloutShare{Model: args[i], Weight: w})
				m.refs = append(m.refs, refsAt(d, "model "+m.Name+": rollout", args[i])...)
			}
		case "adapters", "adapter_path", "adapter_pattern", "adapter_cap", "adapter_idle", "adapter_loads_per_tenant", "adapter_load_timeout":
			if m.Adapters == nil {
				m.Adapters = new(AdaptersConfig)
			}
			err = m.Adapters.unmarshalCaddyfile(d, opt)
		case "required":
			if d.NextArg() {
				return d.Errf("required takes no argument (model %q)", m.Name)
			}
			m.Required = true
		case "fallback":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("fallback: want at least one model for model %q", m.Name)
			}
			m.Fallbacks = append(m.Fallbacks, args...)
			m.refs = append(m.refs, refsAt(d, "model "+m.Name+": fallback", args...)...)
		case "cache_sharing", "cache_salt", "allow_members":
			_, err = m.boundaryOption(d, opt)
		default:
			return d.Errf("unrecognized option %q in model %q", d.Val(), m.Name)
		}
		if err != nil {
			return err
		}
	}
	if affinity != nil {
		affinity.InnerRaw = m.PolicyRaw // nil: the affinity's default
		m.PolicyRaw = caddyconfig.JSONModuleObject(affinity, "policy", "affinity", nil)
	}
	return m.setSource(d, static, consul)
}

// setSource turns the static and consul_* shorthands into the model's
// source module.
func (m *ModelConfig) setSource(d *caddyfile.Dispenser, static *llmsource.Static, consul *llmsource.Consul) error {
	given := 0
	for _, set := range []bool{static != nil, consul != nil, m.SourceRaw != nil} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return d.Errf("model %q: static, consul_service and source exclude each other", m.Name)
	case consul != nil && consul.Service == "":
		return d.Errf("model %q: consul_tag, consul_filter, consul_datacenter and consul_token need consul_service", m.Name)
	case static != nil:
		m.SourceRaw = caddyconfig.JSONModuleObject(static, "source", "static", nil)
	case consul != nil:
		m.SourceRaw = caddyconfig.JSONModuleObject(consul, "source", "consul", nil)
	}
	return nil
}

// guestModule parses `<option> <name> [args] [{ ... }]` into the JSON of
// the guest module <namespace>.<name>. An unknown name names the known ones.
func guestModule(d *caddyfile.Dispenser, option, namespace, inlineKey string) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.Errf("%s: want a name (one of %s)", option, knownModules(namespace))
	}
	name := d.Val()
	info, err := caddy.GetModule(namespace + "." + name)
	if err != nil {
		return nil, d.Errf("unknown %s %q (want one of %s)", option, name, knownModules(namespace))
	}
	if _, ok := info.New().(caddyfile.Unmarshaler); !ok {
		// A module without options.
		if d.NextArg() || d.NextBlock(d.Nesting()) {
			return nil, d.Errf("%s %s takes no options", option, name)
		}
		return moduleObject(inlineKey, name), nil
	}
	// The module parses its segment from its own name on.
	mod, err := caddyfile.UnmarshalModule(d, namespace+"."+name)
	if err != nil {
		return nil, err
	}
	return caddyconfig.JSONModuleObject(mod, inlineKey, name, nil), nil
}

// unmarshalCaddyfile parses `load_metrics off | { interval <d>; timeout <d>; path <path>; dialect <name> }`.
func (l *LoadMetricsConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return d.Errf("load_metrics: want 'off' or a block")
		}
		l.Disabled = true
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "interval":
			err = positiveDuration(d, "load_metrics interval", &l.Interval)
		case "timeout":
			err = positiveDuration(d, "load_metrics timeout", &l.Timeout)
		case "path":
			if err = oneString(d, &l.Path); err == nil && !strings.HasPrefix(l.Path, "/") {
				err = d.Errf("load_metrics path: want a path starting with /, got %q", l.Path)
			}
		case "dialect":
			if err = oneString(d, &l.Dialect); err == nil {
				// Any registered dialect module, a third party's too.
				if _, gerr := caddy.GetModule(llmdialect.Namespace + "." + l.Dialect); gerr != nil {
					err = d.Errf("load_metrics dialect: want one of %s, got %q", knownModules(llmdialect.Namespace), l.Dialect)
				}
			}
		default:
			return d.Errf("unrecognized load_metrics option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *BreakerConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return d.Errf("breaker: want 'off' or a block")
		}
		b.Disabled = true
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		var n int
		switch opt := d.Val(); opt {
		case "consecutive_failures", "min_requests", "half_open_requests":
			if err = positiveInt(d, opt, &n); err == nil {
				switch opt {
				case "consecutive_failures":
					b.ConsecutiveFailures = uint32(n)
				case "min_requests":
					b.MinRequests = uint32(n)
				default:
					b.HalfOpenRequests = uint32(n)
				}
			}
		case "failure_ratio":
			var s string
			if err = oneString(d, &s); err == nil {
				b.FailureRatio, err = strconv.ParseFloat(s, 64)
				if err != nil || b.FailureRatio <= 0 || b.FailureRatio > 1 {
					return d.Errf("failure_ratio: want a number in (0, 1], got %q", s)
				}
			}
		case "window":
			err = positiveDuration(d, opt, &b.Window)
		case "open_timeout":
			err = positiveDuration(d, opt, &b.OpenTimeout)
		default:
			return d.Errf("unrecognized breaker option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *SlowReplicasConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return d.Errf("slow_replicas: want 'off' or a block")
		}
		c.Disabled = true
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "factor":
			var s string
			if err = oneString(d, &s); err == nil {
				c.Factor, err = strconv.ParseFloat(s, 64)
				if err != nil || !(c.Factor > 1) || math.IsInf(c.Factor, 0) {
					return d.Errf("slow_replicas factor: want a number above 1, got %q", s)
				}
			}
		case "min_samples":
			err = positiveInt(d, opt, &c.MinSamples)
		case "half_life":
			err = positiveDuration(d, opt, &c.HalfLife)
		case "cooldown":
			err = positiveDuration(d, opt, &c.Cooldown)
		case "max_cooldown":
			err = positiveDuration(d, opt, &c.MaxCooldown)
		case "max_ejected":
			var s string
			if err = oneString(d, &s); err == nil {
				c.MaxEjected, err = parseShare(s)
				if err != nil {
					return d.Errf("slow_replicas max_ejected: %v", err)
				}
			}
		default:
			return d.Errf("unrecognized slow_replicas option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseShare reads a share of a whole: "50%" or "0.5", above 0 and at most
// 100%.
func parseShare(s string) (float64, error) {
	num, pct := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(num, 64)
	if pct {
		v /= 100
	}
	if err != nil || !(v > 0 && v <= 1) {
		return 0, fmt.Errorf("want a share such as 50%% or 0.5, above 0 and at most 100%%, got %q", s)
	}
	return v, nil
}

func (q *QueueConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return d.Errf("queue: want 'off' or a block")
		}
		q.Disabled = true
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "length":
			err = positiveInt(d, opt, &q.Length)
		case "timeout":
			err = positiveDuration(d, opt, &q.Timeout)
		case "order":
			if err = oneString(d, &q.Order); err == nil {
				if _, perr := pool.ParseQueueOrder(q.Order); perr != nil {
					err = d.Errf("queue order: want fair or fifo, got %q", q.Order)
				}
			}
		case "reserve", "shed", "shed_kv":
			err = q.shedOption(d, opt)
		default:
			return d.Errf("unrecognized queue option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// continueOption reads "continue off | on | <n>": mid-stream
// continuation, and how many continuations in a row may bring no text
// (off is stored as -1, on as 0: the default).
func continueOption(d *caddyfile.Dispenser, dst *int) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	switch s {
	case "off":
		*dst = -1
	case "on":
		*dst = 0
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return d.Errf("continue %q: want off, on or a positive number of continuations", s)
		}
		*dst = n
	}
	return nil
}
