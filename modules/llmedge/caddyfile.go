package llmedge

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/modules/llmsource"
	"github.com/llmedge/llmedge/pool"
	"github.com/llmedge/llmedge/scrape"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("llmedge", parseGlobalOption)
}

func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "llmedge", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile parses the global option block:
//
//	llmedge {
//		issuer            <iss>
//		audience          <aud>
//		token_ttl         <duration>
//		user              <name> <bcrypt-hash> [<model>...]
//		users_file        <path>
//		default_model     <name>
//		max_body_size     <size>
//		max_header_size   <size>
//		max_messages      <n>
//		max_content_chars <n>
//		ping_interval     <duration>|off
//		max_attempts      <n>
//		dial_timeout      <duration>
//		signing_alg       EdDSA|ES256|HS256
//		hmac_secret       <secret>
//		hmac_secret_file  <path>
//		key_rotation      <duration>
//		key_refresh       <duration>
//		users_file_refresh <duration>
//		client            <client_id> <bcrypt-hash-of-secret>
//		api_key_ttl       <duration>
//		api_keys_refresh  <duration>
//		refresh_token_ttl <duration>|off
//		redis             <redis://...|rediss://...> [{
//			username <name>
//			password <password>             # e.g. {env.REDIS_PASSWORD}
//			timeout  <duration>             # every call; default 250ms
//			prefix   <prefix>               # keys and channels; default llmedge:
//			ca_file  <path>                 # rediss:// with a private CA
//		}]
//		on_redis_failure  open|closed
//		revocation_refresh <duration>
//		limits {                            # every user's default
//			rpm                <n>|off
//			tpm                <n>|off
//			concurrency        <n>|off
//			default_max_tokens <n>          # reply reserved when max_tokens is unset
//			api_key { rpm <n>; tpm <n>; concurrency <n> }
//		}
//		user <name> <bcrypt-hash> [<model>...] [{
//			limits { rpm <n>|off; tpm <n>|off; concurrency <n>|off }
//		}]
//		consul [<address>] {
//			... (see ConsulOptions)
//		}
//		model <name> {
//			static              [<protocol>+]<url>...      # shorthand for source static
//			weight              <url> <n>
//			consul_service      <service>                  # shorthand for source consul
//			consul_tag          <tag>
//			consul_filter       <expression>
//			consul_datacenter   <dc>
//			consul_token        <acl-token>
//			source              <name> [<args>] { ... }    # a module of llmedge.sources
//			protocol            <name> [{ ... }]           # a module of llmedge.protocols
//			lb_policy           <name> [{ ... }]           # a module of llmedge.policies
//			affinity            user|header <name>|cookie <name> [{ load_factor <x> }]
//			load_metrics        off | { interval <d>; timeout <d>; path <path>; dialect <name> }
//			upstream_model      <name>
//			system_message      <text>
//			max_tokens          <n>
//			api_key             <key>
//			api_key_env         <VAR>
//			health_interval     <duration>|off
//			health_timeout      <duration>
//			max_concurrency     <n>
//			first_token_timeout <duration>
//			idle_timeout        <duration>
//			total_timeout       <duration>
//			response_timeout    <duration>
//			stream_upstream     auto|always
//			dial_timeout        <duration>
//			max_attempts        <n>
//			try_duration        <duration>
//			breaker off | {
//				consecutive_failures <n>
//				failure_ratio        <0..1>
//				min_requests         <n>
//				window               <duration>
//				open_timeout         <duration>
//				half_open_requests   <n>
//			}
//			queue off | {
//				length  <n>
//				timeout <duration>
//				order   fair|fifo
//			}
//			limits { rpm <n>|off; tpm <n>|off; concurrency <n>|off }   # per user, on this model
//		}
//	}
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var err error
		switch d.Val() {
		case "issuer":
			err = oneString(d, &a.Issuer)
		case "audience":
			err = oneString(d, &a.Audience)
		case "token_ttl":
			err = positiveDuration(d, d.Val(), &a.TokenTTL)
		case "users_file":
			err = oneString(d, &a.UsersFile)
		case "default_model":
			err = oneString(d, &a.DefaultModel)
		case "user":
			args := d.RemainingArgs()
			if len(args) < 2 {
				return d.Errf("user: want <name> <bcrypt-hash> [<model>...] [{ limits { ... } }]")
			}
			u := auth.User{Name: args[0], PasswordHash: args[1], Models: args[2:]}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				if d.Val() != "limits" {
					return d.Errf("unrecognized option %q for user %q (want limits)", d.Val(), u.Name)
				}
				l, err := parseLimits(d, "limits of user "+u.Name, nil)
				if err != nil {
					return err
				}
				u.Limits = &l
			}
			a.Users = append(a.Users, u)
		case "redis":
			if a.Redis != nil {
				return d.Err("redis: given twice")
			}
			a.Redis = new(RedisConfig)
			err = a.Redis.unmarshalCaddyfile(d)
		case "on_redis_failure":
			if err = oneString(d, &a.OnRedisFailure); err == nil && a.OnRedisFailure != RedisFailOpen && a.OnRedisFailure != RedisFailClosed {
				err = d.Errf("on_redis_failure: want open or closed, got %q", a.OnRedisFailure)
			}
		case "revocation_refresh":
			err = positiveDuration(d, d.Val(), &a.RevocationRefresh)
		case "limits":
			if a.RateLimits != nil {
				return d.Err("limits: given twice")
			}
			rl := new(RateLimitsConfig)
			rl.Limit, err = parseLimits(d, "limits", func(opt string) (bool, error) {
				switch opt {
				case "default_max_tokens":
					return true, positiveInt(d, opt, &rl.DefaultMaxTokens)
				case "api_key":
					l, err := parseLimits(d, "limits api_key", nil)
					rl.APIKey = &l
					return true, err
				}
				return false, nil
			})
			a.RateLimits = rl
		case "max_body_size":
			var s string
			if err = oneString(d, &s); err == nil {
				var n uint64
				if n, err = humanize.ParseBytes(s); err != nil || n == 0 {
					return d.Errf("max_body_size %q: want a positive size such as 1MiB", s)
				}
				a.Limits.MaxBodyBytes = int64(n)
			}
		case "max_header_size":
			var v string
			if err = oneString(d, &v); err == nil {
				n, perr := humanize.ParseBytes(v)
				if perr != nil || n == 0 || n > 1<<20 {
					return d.Errf("max_header_size %q: want a positive size up to 1MiB, e.g. 32KiB", v)
				}
				a.Limits.MaxHeaderBytes = int(n)
			}
		case "max_messages":
			err = positiveInt(d, d.Val(), &a.Limits.MaxMessages)
		case "max_content_chars":
			err = positiveInt(d, d.Val(), &a.Limits.MaxContentChars)
		case "ping_interval":
			var v string
			if err = oneString(d, &v); err == nil {
				if v == "off" {
					a.PingInterval = -1
				} else if dur, perr := caddy.ParseDuration(v); perr != nil || dur <= 0 {
					err = d.Errf("ping_interval %q: want a positive duration or off", v)
				} else {
					a.PingInterval = caddy.Duration(dur)
				}
			}
		case "max_attempts":
			err = positiveInt(d, d.Val(), &a.MaxAttempts)
		case "dial_timeout":
			err = positiveDuration(d, d.Val(), &a.DialTimeout)
		case "signing_alg":
			err = oneString(d, &a.SigningAlg)
		case "hmac_secret":
			err = oneString(d, &a.HMACSecret)
		case "hmac_secret_file":
			err = oneString(d, &a.HMACSecretFile)
		case "key_rotation":
			err = positiveDuration(d, d.Val(), &a.KeyRotation)
		case "key_refresh":
			err = positiveDuration(d, d.Val(), &a.KeyRefresh)
		case "users_file_refresh":
			err = positiveDuration(d, d.Val(), &a.UsersFileRefresh)
		case "client":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("client: want <client_id> <bcrypt-hash-of-secret>")
			}
			if a.Clients == nil {
				a.Clients = map[string]string{}
			}
			a.Clients[args[0]] = args[1]
		case "api_key_ttl":
			err = positiveDuration(d, d.Val(), &a.APIKeyTTL)
		case "api_keys_refresh":
			err = positiveDuration(d, d.Val(), &a.APIKeysRefresh)
		case "refresh_token_ttl":
			var v string
			if err = oneString(d, &v); err == nil {
				if v == "off" {
					a.RefreshTokenTTL = -1
				} else if dur, perr := caddy.ParseDuration(v); perr != nil || dur <= 0 {
					err = d.Errf("refresh_token_ttl %q: want a positive duration or off", v)
				} else {
					a.RefreshTokenTTL = caddy.Duration(dur)
				}
			}
		case "consul":
			if a.Consul != nil {
				return d.Err("consul: given twice")
			}
			a.Consul = new(ConsulOptions)
			err = a.Consul.unmarshalCaddyfile(d)
		case "model":
			m := new(ModelConfig)
			if err = m.unmarshalCaddyfile(d); err == nil {
				a.Models = append(a.Models, m)
			}
		default:
			return d.Errf("unrecognized llmedge option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

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
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "static":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("static: want at least one replica URL")
			}
			if static == nil {
				static = new(llmsource.Static)
			}
			static.Replicas = append(static.Replicas, args...)
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
			m.Affinity = new(AffinityConfig)
			err = m.Affinity.unmarshalCaddyfile(d)
		case "load_metrics":
			m.LoadMetrics = new(LoadMetricsConfig)
			err = m.LoadMetrics.unmarshalCaddyfile(d)
		case "upstream_model":
			err = oneString(d, &m.UpstreamModel)
		case "system_message":
			err = oneString(d, &m.SystemMessage)
		case "max_tokens":
			err = positiveInt(d, opt, &m.MaxTokens)
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
		case "dial_timeout":
			err = positiveDuration(d, opt, &m.DialTimeout)
		case "max_attempts":
			err = positiveInt(d, opt, &m.MaxAttempts)
		case "try_duration":
			err = positiveDuration(d, opt, &m.TryDuration)
		case "breaker":
			m.Breaker = new(BreakerConfig)
			err = m.Breaker.unmarshalCaddyfile(d)
		case "queue":
			m.Queue = new(QueueConfig)
			err = m.Queue.unmarshalCaddyfile(d)
		case "limits":
			var l limits.Limit
			l, err = parseLimits(d, "limits of model "+m.Name, nil)
			m.RateLimits = &l
		default:
			return d.Errf("unrecognized option %q in model %q", d.Val(), m.Name)
		}
		if err != nil {
			return err
		}
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

// unmarshalCaddyfile parses `affinity user|header <name>|cookie <name> [{ load_factor <x> }]`.
func (a *AffinityConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	switch {
	case len(args) == 1 && args[0] == "user":
		a.By = "user"
	case len(args) == 2 && (args[0] == "header" || args[0] == "cookie"):
		a.By, a.Name = args[0], args[1]
	default:
		return d.Errf("affinity: want user, header <name> or cookie <name>")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "load_factor":
			var v string
			if err := oneString(d, &v); err != nil {
				return err
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 1 {
				return d.Errf("affinity load_factor: want a number ≥ 1, got %q", v)
			}
			a.LoadFactor = f
		default:
			return d.Errf("unrecognized affinity option %q", d.Val())
		}
	}
	return nil
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
				if _, ok := scrape.DefaultDialects()[l.Dialect]; !ok {
					err = d.Errf("load_metrics dialect: want one of vllm, sglang, tgi, llamacpp, auto, got %q", l.Dialect)
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
		default:
			return d.Errf("unrecognized queue option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseLimits parses `limits { rpm <n>|off; tpm <n>|off; concurrency <n>|off }`
// from the option's name on; extra, when set, parses the options a block
// adds (reporting whether it knew the option).
func parseLimits(d *caddyfile.Dispenser, what string, extra func(opt string) (bool, error)) (limits.Limit, error) {
	var l limits.Limit
	if d.NextArg() {
		return l, d.Errf("%s: want a block { rpm <n>; tpm <n>; concurrency <n> }", what)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var dst *int
		switch opt {
		case "rpm":
			dst = &l.RPM
		case "tpm":
			dst = &l.TPM
		case "concurrency":
			dst = &l.Concurrency
		default:
			if extra != nil {
				known, err := extra(opt)
				if err != nil {
					return l, err
				}
				if known {
					continue
				}
			}
			return l, d.Errf("%s: unrecognized option %q (want rpm, tpm or concurrency)", what, opt)
		}
		var v string
		if err := oneString(d, &v); err != nil {
			return l, err
		}
		if v == "off" {
			*dst = limits.Off
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return l, d.Errf("%s: %s: want a whole number ≥ 1 or off, got %q", what, opt, v)
		}
		*dst = n
	}
	return l, nil
}

// unmarshalCaddyfile parses `redis <url> [{ username; password; timeout; prefix; ca_file }]`.
func (r *RedisConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.Errf("redis: want a URL, redis://host:port or rediss://host:port")
	}
	r.URL = d.Val()
	if !strings.HasPrefix(r.URL, "redis://") && !strings.HasPrefix(r.URL, "rediss://") {
		return d.Errf("redis: want a redis:// or rediss:// URL")
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "username":
			err = oneString(d, &r.Username)
		case "password":
			err = oneString(d, &r.Password)
		case "timeout":
			err = positiveDuration(d, "redis timeout", &r.Timeout)
		case "prefix":
			err = oneString(d, &r.Prefix)
		case "ca_file":
			err = oneString(d, &r.CAFile)
		default:
			return d.Errf("unrecognized redis option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func oneString(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func oneInt(d *caddyfile.Dispenser, opt string, dst *int) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return d.Errf("%s: want a non-negative whole number, got %q", opt, s)
	}
	*dst = n
	return nil
}

// positiveInt parses a whole number ≥ 1: 0 would only mean "the default".
func positiveInt(d *caddyfile.Dispenser, opt string, dst *int) error {
	if err := oneInt(d, opt, dst); err != nil {
		return err
	}
	if *dst < 1 {
		return d.Errf("%s: want a whole number ≥ 1, got %d", opt, *dst)
	}
	return nil
}

// positiveDuration parses a duration > 0: zero or negative would only
// mean "the default", or nothing sensible.
func positiveDuration(d *caddyfile.Dispenser, opt string, dst *caddy.Duration) error {
	if err := oneDuration(d, opt, dst); err != nil {
		return err
	}
	if *dst <= 0 {
		return d.Errf("%s: want a positive duration, got %s", opt, time.Duration(*dst))
	}
	return nil
}

func oneDuration(d *caddyfile.Dispenser, opt string, dst *caddy.Duration) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	v, err := caddy.ParseDuration(s)
	if err != nil {
		return d.Errf("%s %q: %v", opt, s, err)
	}
	*dst = caddy.Duration(v)
	return nil
}

var _ caddyfile.Unmarshaler = (*App)(nil)
