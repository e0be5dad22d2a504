package llmapp

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/tenancy"
)

// RedisConfig is the `redis` option: the shared state of every gateway
// instance (tenants' limits, revocations).
type RedisConfig struct {
	// URL is redis://[user:password@]host:port[/db] or rediss:// (TLS);
	// placeholders such as {env.REDIS_PASSWORD} are replaced. Exclusive
	// with Sentinel and Cluster.
	URL string `json:"url,omitempty"`
	// Sentinel is a Redis Sentinel deployment: the client follows the
	// primary the sentinels name across a failover.
	Sentinel *RedisSentinel `json:"sentinel,omitempty"`
	// Cluster is the seed nodes (host:port) of a Redis Cluster.
	Cluster []string `json:"cluster,omitempty"`
	// TLS talks TLS to a Sentinel or Cluster deployment's servers.
	TLS bool `json:"tls,omitempty"`
	// Username and Password, when set, replace the URL's; placeholders
	// are replaced (keep secrets out of the Caddyfile).
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Timeout bounds every Redis call on the request path. Default 250ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Prefix starts every key and channel. Default "llmedge:".
	Prefix string `json:"prefix,omitempty"`
	// CAFile verifies a rediss:// server with this CA instead of the
	// system's.
	CAFile string `json:"ca_file,omitempty"`
}

// RedisSentinel is `redis sentinel <master> <host:port>...`.
type RedisSentinel struct {
	// Master is the name the sentinels know the primary by.
	Master string `json:"master"`
	// Addrs are the sentinels' addresses (host:port).
	Addrs []string `json:"addrs"`
	// Username and Password are the sentinels' own, when they have one;
	// placeholders are replaced.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// RateLimitsConfig is the `limits` block of the llmedge option: every
// user's default limits (rpm, tpm, concurrency), an API key's, and the
// reply size reserved for a request that sets no max_tokens.
type RateLimitsConfig struct {
	limits.Limit
	// APIKey limits each API key, on top of its user's limits.
	APIKey *limits.Limit `json:"api_key,omitempty"`
	// DefaultMaxTokens is the reply size reserved against tpm when
	// neither the request nor the model sets max_tokens. Default 1024.
	DefaultMaxTokens int `json:"default_max_tokens,omitempty"`
	// BudgetWarning is the part of a budget used past which the status
	// page warns. Default 0.8.
	BudgetWarning float64 `json:"budget_warning,omitempty"`
}

// Failure modes when Redis is unreachable.
const (
	RedisFailOpen   = "open"
	RedisFailClosed = "closed"
)

// tenancyConfig resolves the tenancy options (placeholders in secrets and
// paths replaced) for tenancy.New.
func (a *App) tenancyConfig(ctx caddy.Context, repl *caddy.Replacer) (tenancy.Config, error) {
	switch a.OnRedisFailure {
	case "", RedisFailOpen, RedisFailClosed:
	default:
		return tenancy.Config{}, fmt.Errorf("on_redis_failure %q: want open or closed", a.OnRedisFailure)
	}
	cfg := tenancy.Config{
		FailClosed:        a.OnRedisFailure == RedisFailClosed,
		Storage:           a.storage(ctx.Storage()),
		RevocationRefresh: time.Duration(a.RevocationRefresh),
		MaxTokenLifetime:  time.Duration(a.TokenTTL) + auth.VerifyLeeway + time.Minute,
		Kept:              kept,
		Logger:            a.logger,
		Registry:          metricsRegistry(ctx),
		Teams:             a.tenancyTeams(),
		BudgetSeed:        a.seedBudget,
	}
	if a.RateLimits != nil {
		cfg.BudgetWarning = a.RateLimits.BudgetWarning
	}
	if rc := a.Redis; rc != nil {
		cfg.Redis = &tenancy.Redis{
			URL: repl.ReplaceAll(rc.URL, ""), Username: repl.ReplaceAll(rc.Username, ""),
			Password: repl.ReplaceAll(rc.Password, ""), Timeout: time.Duration(rc.Timeout),
			Prefix: rc.Prefix, CAFile: repl.ReplaceAll(rc.CAFile, ""), TLS: rc.TLS,
		}
		for _, a := range rc.Cluster {
			cfg.Redis.Cluster = append(cfg.Redis.Cluster, repl.ReplaceAll(a, ""))
		}
		if sn := rc.Sentinel; sn != nil {
			rs := &tenancy.Sentinel{Master: repl.ReplaceAll(sn.Master, ""), Username: repl.ReplaceAll(sn.Username, ""),
				Password: repl.ReplaceAll(sn.Password, "")}
			for _, a := range sn.Addrs {
				rs.Addrs = append(rs.Addrs, repl.ReplaceAll(a, ""))
			}
			cfg.Redis.Sentinel = rs
		}
	}
	if a.limitsConfigured() {
		l := &tenancy.Limits{Models: map[string]limits.Limit{}}
		if rl := a.RateLimits; rl != nil {
			l.Default, l.ReplyReservation = rl.Limit, rl.DefaultMaxTokens
			if rl.APIKey != nil {
				l.APIKey = *rl.APIKey
			}
		}
		for _, m := range a.Models {
			if m.RateLimits != nil && m.RateLimits.Enforced() {
				l.Models[m.Name] = *m.RateLimits
			}
		}
		l.Tiers = a.tierLimits()
		l.Cost = a.priceCost()
		cfg.Limits = l
	}
	return cfg, nil
}

// limitsConfigured reports whether any limit may apply: without one, the
// pipeline has no Admitter and the admission stage costs nothing. A users
// file may gain limits while the gateway runs, so it counts.
func (a *App) limitsConfigured() bool {
	if a.RateLimits != nil && (a.RateLimits.Enforced() || (a.RateLimits.APIKey != nil && a.RateLimits.APIKey.Enforced())) {
		return true
	}
	for _, m := range a.Models {
		if m.RateLimits != nil && m.RateLimits.Enforced() {
			return true
		}
	}
	for _, u := range a.Users {
		if u.Limits != nil && u.Limits.Enforced() {
			return true
		}
	}
	for _, t := range a.Tiers {
		if t.Limit.Enforced() {
			return true
		}
	}
	if a.budgetsConfigured() {
		return true
	}
	return a.UsersFile != ""
}
