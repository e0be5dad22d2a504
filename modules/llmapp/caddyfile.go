package llmapp

import (
	"encoding/json"
	"net"
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
	"github.com/llmedge/llmedge/modules/llmadmitter"
	"github.com/llmedge/llmedge/modules/llmauthenticator"
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
//		body_timeout      <duration>|off
//		token_max_body_size <size>
//		token_body_timeout  <duration>|off
//		max_messages      <n>
//		max_content_chars <n>
//		ping_interval     <duration>|off
//		usage_drain       <duration>|off
//		max_attempts      <n>
//		dial_timeout      <duration>
//		signing_alg       EdDSA|ES256|HS256
//		hmac_secret       <secret>
//		hmac_secret_file  <path>
//		cache_secret      <secret>           # cache partitions' keys and salts; default: kept in storage
//		cache_secret_file <path>
//		key_rotation      <duration>
//		key_refresh       <duration>
//		users_file_refresh <duration>
//		client            <client_id> <bcrypt-hash-of-secret>
//		api_key_ttl       <duration>
//		api_keys_refresh  <duration>
//		refresh_token_ttl <duration>|off
//		redis             <redis://...|rediss://...>|sentinel <master> <host:port>...|cluster <host:port>... [{
//			username <name>
//			password <password>             # e.g. {env.REDIS_PASSWORD}
//			timeout  <duration>             # every call; default 250ms
//			prefix   <prefix>               # keys and channels; default llmedge:
//			ca_file  <path>                 # rediss:// with a private CA
//			tls                             # sentinel or cluster over TLS
//			sentinel_username <name>        # the sentinels' own credentials
//			sentinel_password <password>
//		}]
//		authenticator     <name> [{ ... }]     # repeatable, asked in order; default bearer
//		trust <issuer URL> {                # a trusted OpenID provider (docs/identity.md)
//			audience <aud>...; grant <claim> <value> -> <model>...; tier <claim> <value> -> <tier>; ...
//		}
//		tier <name> { rpm <n>|off; tpm <n>|off; concurrency <n>|off; weight <x>; budget ...; max_generations <n>|off; max_prompt_tokens <n>|off }   # limits of mapped identities
//		team <name> [{                      # a team: its models cap its members', its limits and budgets add to theirs
//			models <model>...; rpm <n>|off; tpm <n>|off; concurrency <n>|off
//			budget <tokens|cost> <amount>|off per <day|month>   # repeatable
//		}]
//		admitter          <name> [{ ... }]     # repeatable, asked in order; default limits
//		on_redis_failure  open|closed
//		share_routing     on|off            # routing decisions shared over redis; default on with redis
//		revocation_refresh <duration>
//		limits {                            # every user's default
//			rpm                <n>|off
//			tpm                <n>|off
//			concurrency        <n>|off
//			default_max_tokens <n>          # reply reserved when max_tokens is unset
//			budget             <tokens|cost> <amount>|off per <day|month>   # every user's; repeatable
//			budget_warning     <fraction>|<n>%   # the status page warns from this part on; default 80%
//			api_key { rpm <n>; tpm <n>; concurrency <n>; budget ... }
//		}
//		user <name> <bcrypt-hash> [<model>...] [{
//			limits { rpm <n>|off; tpm <n>|off; concurrency <n>|off; budget ... }
//			team   <name>
//		}]
//		consul [<address>] {
//			... (see ConsulOptions)
//		}
//		ledger [sqlite [<path>] | postgres <dsn>] [{   # the usage ledger (docs/ledger.md)
//			retention <duration>|off; buffer <n>; batch <n>; flush_interval <duration>
//		}]
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
//			max_generations     <n>|off                    # n, best_of a request may ask; default 16
//			max_prompt_tokens   <n>|off                    # a request's prompt, estimated; default off
//			price               <input> <cached> <output>  # per million tokens, for the ledger
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
			if err = oneString(d, &a.DefaultModel); err == nil {
				a.refs = append(a.refs, refsAt(d, "default_model", a.DefaultModel)...)
			}
		case "fallback_default":
			if err = oneString(d, &a.FallbackDefault); err == nil && a.FallbackDefault != "on" && a.FallbackDefault != "off" {
				err = d.Errf("fallback_default: want on or off, got %q", a.FallbackDefault)
			}
		case "user":
			args := d.RemainingArgs()
			if len(args) < 2 {
				return d.Errf("user: want <name> <bcrypt-hash> [<model>...] [{ limits { ... } }]")
			}
			u := auth.User{Name: args[0], PasswordHash: args[1], Models: args[2:]}
			a.userRefs = append(a.userRefs, refsAt(d, "user "+u.Name, u.Models...)...)
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				switch d.Val() {
				case "limits":
					l, err := parseLimitsWithBudgets(d, "limits of user "+u.Name)
					if err != nil {
						return err
					}
					u.Limits = &l
				case "team":
					if err := oneString(d, &u.Team); err != nil {
						return err
					}
					if err := auth.ValidateTeamName(u.Team); err != nil {
						return d.Errf("user %q: %v", u.Name, err)
					}
				case "priority":
					if err := userPriority(d, &u); err != nil {
						return err
					}
				default:
					return d.Errf("unrecognized option %q for user %q (want limits, team or priority)", d.Val(), u.Name)
				}
			}
			a.Users = append(a.Users, u)
		case "team":
			err = a.parseTeam(d)
		case "trust":
			var t llmauthenticator.Trust
			if t, err = llmauthenticator.ParseTrust(d); err == nil {
				a.Trusts = append(a.Trusts, t)
			}
		case "tier":
			args := d.RemainingArgs()
			if len(args) != 1 {
				return d.Errf("tier: want tier <name> { rpm <n>; tpm <n>; concurrency <n> }")
			}
			if a.Tiers[args[0]] != nil {
				return d.Errf("tier %s: defined twice", args[0])
			}
			tc := &TierConfig{}
			var budgets []limits.Budget
			if tc.Limit, err = parseLimits(d, "tier "+args[0], func(opt string) (bool, error) {
				if opt == "priority" {
					return true, tierPriority(d, args[0], &tc.Priority)
				}
				if opt == "budget" {
					return true, parseBudgetOption(d, "tier "+args[0], &budgets)
				}
				if known, err := parseCapsOption(d, "tier "+args[0], opt, &tc.CapsConfig); known {
					return true, err
				}
				if opt != "weight" {
					return false, nil
				}
				var v string
				if err := oneString(d, &v); err != nil {
					return true, err
				}
				w, perr := strconv.ParseFloat(v, 64)
				if perr != nil || !(w > 0 && w <= 1000) {
					return true, d.Errf("tier %s: weight: want a number above 0, up to 1000, got %q", args[0], v)
				}
				tc.Weight = w
				return true, nil
			}); err == nil {
				tc.Limit.Budgets = budgets
				if a.Tiers == nil {
					a.Tiers = map[string]*TierConfig{}
				}
				a.Tiers[args[0]] = tc
			}
		case "authenticator":
			var raw json.RawMessage
			if raw, err = guestModule(d, "authenticator", llmauthenticator.Namespace, "authenticator"); err == nil {
				a.AuthenticatorsRaw = append(a.AuthenticatorsRaw, raw)
			}
		case "admitter":
			var raw json.RawMessage
			if raw, err = guestModule(d, "admitter", llmadmitter.Namespace, "admitter"); err == nil {
				a.AdmittersRaw = append(a.AdmittersRaw, raw)
			}
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
		case "share_routing":
			var v string
			if err = oneString(d, &v); err == nil {
				if v != "on" && v != "off" {
					err = d.Errf("share_routing: want on or off, got %q", v)
				} else {
					on := v == "on"
					a.ShareRouting = &on
				}
			}
		case "revocation_refresh":
			err = positiveDuration(d, d.Val(), &a.RevocationRefresh)
		case "limits":
			if a.RateLimits != nil {
				return d.Err("limits: given twice")
			}
			rl := new(RateLimitsConfig)
			var budgets []limits.Budget
			rl.Limit, err = parseLimits(d, "limits", func(opt string) (bool, error) {
				switch opt {
				case "default_max_tokens":
					return true, positiveInt(d, opt, &rl.DefaultMaxTokens)
				case "budget_warning":
					return true, parseBudgetWarning(d, &rl.BudgetWarning)
				case "budget":
					return true, parseBudgetOption(d, "limits", &budgets)
				case "api_key":
					l, err := parseLimitsWithBudgets(d, "limits api_key")
					rl.APIKey = &l
					return true, err
				}
				return false, nil
			})
			rl.Limit.Budgets = budgets
			a.RateLimits = rl
		case "max_body_size":
			err = bodySize(d, &a.Limits.MaxBodyBytes)
		case "body_timeout":
			err = durationOrOff(d, d.Val(), &a.BodyTimeout)
		case "token_body_timeout":
			err = durationOrOff(d, d.Val(), &a.TokenBodyTimeout)
		case "token_max_body_size":
			var s string
			if err = oneString(d, &s); err == nil {
				n, perr := humanize.ParseBytes(s)
				if perr != nil || n == 0 || n > 1<<20 {
					return d.Errf("token_max_body_size %q: want a positive size up to 1MiB, such as 16KiB", s)
				}
				a.TokenMaxBodyBytes = int64(n)
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
		case "usage_drain":
			var v string
			if err = oneString(d, &v); err == nil {
				if v == "off" {
					a.UsageDrain = 0
				} else if dur, perr := caddy.ParseDuration(v); perr != nil || dur <= 0 || dur > time.Minute {
					err = d.Errf("usage_drain %q: want a duration up to 1m, or off", v)
				} else {
					a.UsageDrain = caddy.Duration(dur)
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
		case "cache_secret":
			err = oneString(d, &a.CacheSecret)
		case "cache_secret_file":
			err = oneString(d, &a.CacheSecretFile)
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
		case "ledger":
			if a.Ledger != nil {
				return d.Err("ledger: given twice")
			}
			a.Ledger = new(LedgerConfig)
			err = a.Ledger.unmarshalCaddyfile(d)
		case "batches":
			if a.Batches != nil {
				return d.Err("batches: given twice")
			}
			a.Batches = new(BatchesConfig)
			err = a.Batches.unmarshalCaddyfile(d)
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
	return a.checkRefs()
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

// unmarshalCaddyfile parses `redis <url>|sentinel <master> <addr>...|cluster
// <addr>... [{ username; password; timeout; prefix; ca_file; tls;
// sentinel_username; sentinel_password }]`.
func (r *RedisConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.Errf("redis: want a URL (redis://host:port or rediss://host:port), sentinel <master> <host:port>... or cluster <host:port>...")
	}
	switch v := d.Val(); {
	case v == "sentinel":
		args := d.RemainingArgs()
		if len(args) < 2 {
			return d.Errf("redis sentinel: want the primary's name and at least one sentinel's host:port")
		}
		r.Sentinel = &RedisSentinel{Master: args[0], Addrs: args[1:]}
	case v == "cluster":
		if r.Cluster = d.RemainingArgs(); len(r.Cluster) == 0 {
			return d.Errf("redis cluster: want at least one node's host:port")
		}
	case strings.HasPrefix(v, "redis://") || strings.HasPrefix(v, "rediss://"):
		r.URL = v
		if d.NextArg() {
			return d.ArgErr()
		}
	default:
		return d.Errf("redis: want a redis:// or rediss:// URL, sentinel or cluster, got %q", v)
	}
	if err := r.checkHosts(d); err != nil {
		return err
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
		case "tls":
			if r.URL != "" {
				return d.Errf("redis tls: for sentinel or cluster; a URL says it with rediss://")
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			r.TLS = true
		case "sentinel_username", "sentinel_password":
			if r.Sentinel == nil {
				return d.Errf("redis %s: only with redis sentinel", opt)
			}
			if opt == "sentinel_username" {
				err = oneString(d, &r.Sentinel.Username)
			} else {
				err = oneString(d, &r.Sentinel.Password)
			}
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
// durationOrOff reads a positive duration, or off (stored as -1).
func durationOrOff(d *caddyfile.Dispenser, opt string, dst *caddy.Duration) error {
	var v string
	if err := oneString(d, &v); err != nil {
		return err
	}
	if v == "off" {
		*dst = -1
		return nil
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return d.Errf("%s %q: want a positive duration or off", opt, v)
	}
	*dst = caddy.Duration(dur)
	return nil
}

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

// checkHosts refuses a sentinel or cluster address that is not host:port
// (placeholders are left for the load to resolve).
func (r *RedisConfig) checkHosts(d *caddyfile.Dispenser) error {
	addrs := r.Cluster
	if r.Sentinel != nil {
		addrs = r.Sentinel.Addrs
	}
	for _, a := range addrs {
		if strings.Contains(a, "{") {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return d.Errf("redis: %q: want host:port", a)
		}
	}
	return nil
}
