package llmedge

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"

	"github.com/llmedge/llmedge/auth"
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
//		max_messages      <n>
//		max_content_chars <n>
//		ping_interval     <duration>
//		max_attempts      <n>
//		dial_timeout      <duration>
//		signing_alg       EdDSA|ES256|HS256
//		hmac_secret       <secret>
//		hmac_secret_file  <path>
//		key_rotation      <duration>
//		key_refresh       <duration>
//		users_file_refresh <duration>
//		client            <client_id> <bcrypt-hash-of-secret>
//		consul [<address>] {
//			... (see ConsulOptions)
//		}
//		model <name> {
//			static              [<protocol>+]<url>...
//			weight              <url> <n>
//			protocol            openai|vllm|sglang|tgi|llamacpp|ollama|native
//			consul_service      <service>
//			consul_tag          <tag>
//			consul_filter       <expression>
//			consul_datacenter   <dc>
//			consul_token        <acl-token>
//			upstream_model      <name>
//			lb_policy           p2c|round_robin|random|least_requests
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
//			}
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
			err = oneDuration(d, d.Val(), &a.TokenTTL)
		case "users_file":
			err = oneString(d, &a.UsersFile)
		case "default_model":
			err = oneString(d, &a.DefaultModel)
		case "user":
			args := d.RemainingArgs()
			if len(args) < 2 {
				return d.Errf("user: want <name> <bcrypt-hash> [<model>...]")
			}
			a.Users = append(a.Users, auth.User{Name: args[0], PasswordHash: args[1], Models: args[2:]})
		case "max_body_size":
			var s string
			if err = oneString(d, &s); err == nil {
				var n uint64
				if n, err = humanize.ParseBytes(s); err != nil {
					return d.Errf("max_body_size %q: %v", s, err)
				}
				a.Limits.MaxBodyBytes = int64(n)
			}
		case "max_messages":
			err = oneInt(d, d.Val(), &a.Limits.MaxMessages)
		case "max_content_chars":
			err = oneInt(d, d.Val(), &a.Limits.MaxContentChars)
		case "ping_interval":
			err = oneDuration(d, d.Val(), &a.PingInterval)
		case "max_attempts":
			err = oneInt(d, d.Val(), &a.MaxAttempts)
		case "dial_timeout":
			err = oneDuration(d, d.Val(), &a.DialTimeout)
		case "signing_alg":
			err = oneString(d, &a.SigningAlg)
		case "hmac_secret":
			err = oneString(d, &a.HMACSecret)
		case "hmac_secret_file":
			err = oneString(d, &a.HMACSecretFile)
		case "key_rotation":
			err = oneDuration(d, d.Val(), &a.KeyRotation)
		case "key_refresh":
			err = oneDuration(d, d.Val(), &a.KeyRefresh)
		case "users_file_refresh":
			err = oneDuration(d, d.Val(), &a.UsersFileRefresh)
		case "client":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("client: want <client_id> <bcrypt-hash-of-secret>")
			}
			if a.Clients == nil {
				a.Clients = map[string]string{}
			}
			a.Clients[args[0]] = args[1]
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
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "static":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("static: want at least one replica URL")
			}
			m.Static = append(m.Static, args...)
		case "weight":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("weight: want <url> <n>")
			}
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return d.Errf("weight %s: want a whole number ≥ 1, got %q", args[0], args[1])
			}
			if m.Weights == nil {
				m.Weights = map[string]int{}
			}
			m.Weights[args[0]] = n
		case "consul_service":
			err = oneString(d, &m.ConsulService)
		case "consul_tag":
			err = oneString(d, &m.ConsulTag)
		case "consul_filter":
			err = oneString(d, &m.ConsulFilter)
		case "consul_datacenter":
			err = oneString(d, &m.ConsulDatacenter)
		case "consul_token":
			err = oneString(d, &m.ConsulToken)
		case "protocol":
			err = oneString(d, &m.Protocol)
		case "upstream_model":
			err = oneString(d, &m.UpstreamModel)
		case "lb_policy":
			err = oneString(d, &m.LBPolicy)
		case "system_message":
			err = oneString(d, &m.SystemMessage)
		case "max_tokens":
			err = oneInt(d, d.Val(), &m.MaxTokens)
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
			err = oneDuration(d, d.Val(), &m.HealthTimeout)
		case "max_concurrency":
			err = oneInt(d, d.Val(), &m.MaxConcurrency)
		case "first_token_timeout":
			err = oneDuration(d, d.Val(), &m.FirstTokenTimeout)
		case "idle_timeout":
			err = oneDuration(d, d.Val(), &m.IdleTimeout)
		case "total_timeout":
			err = oneDuration(d, d.Val(), &m.TotalTimeout)
		case "dial_timeout":
			err = oneDuration(d, d.Val(), &m.DialTimeout)
		case "max_attempts":
			err = oneInt(d, d.Val(), &m.MaxAttempts)
		case "try_duration":
			err = oneDuration(d, d.Val(), &m.TryDuration)
		case "breaker":
			m.Breaker = new(BreakerConfig)
			err = m.Breaker.unmarshalCaddyfile(d)
		case "queue":
			m.Queue = new(QueueConfig)
			err = m.Queue.unmarshalCaddyfile(d)
		default:
			return d.Errf("unrecognized option %q in model %q", d.Val(), m.Name)
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
			if err = oneInt(d, opt, &n); err == nil {
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
			err = oneDuration(d, opt, &b.Window)
		case "open_timeout":
			err = oneDuration(d, opt, &b.OpenTimeout)
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
			err = oneInt(d, opt, &q.Length)
		case "timeout":
			err = oneDuration(d, opt, &q.Timeout)
		default:
			return d.Errf("unrecognized queue option %q", opt)
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
