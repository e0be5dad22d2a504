package llmauthenticator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/identity"
)

func init() { caddy.RegisterModule(OIDC{}) }

// StartTimeout bounds the wait for the issuers' keys when a configuration
// loads: a provider that is down does not hold the gateway back (its
// tokens are refused until its keys arrive; the loop keeps trying).
const StartTimeout = 5 * time.Second

// OIDC accepts the access tokens (JWTs) of trusted OpenID Connect
// providers, and exchanges them for llmedge tokens at /auth/token
// (RFC 8693). The llmedge block's `trust` lines add it.
type OIDC struct {
	Trusts []Trust `json:"trusts"`

	provider *identity.Provider
	ctx      caddy.Context
}

// Trust is one trusted issuer (see identity.Issuer).
type Trust struct {
	Issuer            string         `json:"issuer"`
	Audience          []string       `json:"audience"`
	Algorithms        []string       `json:"algorithms,omitempty"`
	ClockSkew         caddy.Duration `json:"clock_skew,omitempty"`
	TokenType         string         `json:"token_type,omitempty"`
	AuthorizedParties []string       `json:"authorized_parties,omitempty"`
	// UserClaim names the user: sub (default), email,
	// preferred_username, or a claim path.
	UserClaim  string `json:"user_claim,omitempty"`
	UserPrefix string `json:"user_prefix,omitempty"`
	// Models are granted to every user of the issuer.
	Models      []string    `json:"models,omitempty"`
	Grants      []ClaimRule `json:"grants,omitempty"`
	Tiers       []ClaimRule `json:"tiers,omitempty"`
	DefaultTier string      `json:"default_tier,omitempty"`
	// JWKSURI skips discovery.
	JWKSURI    string         `json:"jwks_uri,omitempty"`
	Refresh    caddy.Duration `json:"refresh,omitempty"`
	MinRefresh caddy.Duration `json:"min_refresh,omitempty"`
	// CAFile verifies the provider's HTTPS with this CA instead of the
	// system's.
	CAFile string `json:"ca_file,omitempty"`
}

// ClaimRule is a grant (Models) or tier (Tier) rule.
type ClaimRule struct {
	Claim  string   `json:"claim"`
	Value  string   `json:"value"`
	Models []string `json:"models,omitempty"`
	Tier   string   `json:"tier,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (OIDC) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".oidc", New: func() caddy.Module { return new(OIDC) }}
}

// Provision keeps the context, for the metrics registry.
func (o *OIDC) Provision(ctx caddy.Context) error {
	o.ctx = ctx
	if len(o.Trusts) == 0 {
		return errors.New("oidc: want at least one trust")
	}
	return nil
}

// Authenticator implements Authenticator: it takes the issuers' key
// caches (shared with the previous configuration when they trust alike)
// and fetches the keys not fetched yet.
func (o *OIDC) Authenticator(env Env) (auth.Authenticator, error) {
	cfg := identity.Config{
		Models: env.Models, Tiers: env.Tiers, LocalIssuer: env.LocalIssuer, Kept: env.Kept,
		Realm: env.Realm, Logger: env.Logger,
	}
	if env.Credentials != nil {
		cfg.Revoked = env.Credentials.Revoked
	}
	repl := caddy.NewReplacer()
	for _, t := range o.Trusts {
		ic := identity.Issuer{
			Issuer: t.Issuer, Audience: t.Audience, Algorithms: t.Algorithms, ClockSkew: time.Duration(t.ClockSkew),
			TokenType: t.TokenType, AuthorizedParties: t.AuthorizedParties,
			Mapping: identity.Mapping{UserClaim: t.UserClaim, UserPrefix: t.UserPrefix, Models: t.Models, DefaultTier: t.DefaultTier},
			JWKSURI: t.JWKSURI, Refresh: time.Duration(t.Refresh), MinRefresh: time.Duration(t.MinRefresh),
		}
		for _, r := range t.Grants {
			ic.Mapping.Grants = append(ic.Mapping.Grants, identity.Rule{Claim: r.Claim, Value: r.Value, Models: r.Models})
		}
		for _, r := range t.Tiers {
			ic.Mapping.Tiers = append(ic.Mapping.Tiers, identity.Rule{Claim: r.Claim, Value: r.Value, Tier: r.Tier})
		}
		ic.CAFile = repl.ReplaceAll(t.CAFile, "")
		cfg.Issuers = append(cfg.Issuers, ic)
	}
	p, err := identity.New(cfg)
	if err != nil {
		return nil, err
	}
	o.provider = p
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	p.Start(ctx)
	cancel()
	if o.ctx.Context != nil {
		if reg := o.ctx.GetMetricsRegistry(); reg != nil {
			if err := reg.Register(&idpCollector{p: p}); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, fmt.Errorf("oidc metrics: %w", err)
				}
			}
		}
	}
	return p, nil
}

// Cleanup lets go of the key caches: the last configuration using one
// stops its refresh loop and waits for it.
func (o *OIDC) Cleanup() error {
	if o.provider != nil {
		o.provider.Stop()
	}
	return nil
}

// IdentityStatus describes each issuer's keys, for /readyz and the
// status page.
func (o *OIDC) IdentityStatus() []identity.SourceStatus {
	if o.provider == nil {
		return nil
	}
	return o.provider.Status()
}

// UnmarshalCaddyfile parses
//
//	authenticator oidc {
//		trust <issuer> { ... }   # repeatable; see ParseTrust
//	}
func (o *OIDC) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the authenticator's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "trust" {
			return d.Errf("oidc: unrecognized option %q (want trust)", d.Val())
		}
		t, err := ParseTrust(d)
		if err != nil {
			return err
		}
		o.Trusts = append(o.Trusts, t)
	}
	return nil
}

// ParseTrust parses a trust line, from its name on:
//
//	trust <issuer URL> {
//		audience           <aud>...                # required: aud holds one
//		algorithms         <alg>...                # default RS256 PS256 ES256 EdDSA
//		clock_skew         <duration>              # default 30s
//		token_type         at+jwt                  # require RFC 9068 access tokens
//		authorized_party   <client_id>...          # azp or client_id must be one
//		user               <claim>                 # default sub
//		user_prefix        <prefix>                # e.g. kc:
//		models             <model>...|*            # for every user of the issuer
//		grant              <claim> <value> -> <model>...|*
//		tier               <claim> <value> -> <tier>
//		default_tier       <tier>
//		jwks_uri           <url>                   # instead of discovery
//		refresh            <duration>              # default 10m
//		min_refresh        <duration>              # default 30s
//		ca_file            <path>
//	}
func ParseTrust(d *caddyfile.Dispenser) (Trust, error) {
	var t Trust
	if !d.NextArg() {
		return t, d.Errf("trust: want an issuer URL")
	}
	t.Issuer = d.Val()
	if d.NextArg() {
		return t, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		args := d.RemainingArgs()
		one := func(dst *string) error {
			if len(args) != 1 {
				return d.Errf("trust %s: %s: want one value", t.Issuer, opt)
			}
			*dst = args[0]
			return nil
		}
		dur := func(dst *caddy.Duration, allowZero bool) error {
			var s string
			if err := one(&s); err != nil {
				return err
			}
			v, err := caddy.ParseDuration(s)
			if err != nil || v < 0 || (v == 0 && !allowZero) {
				return d.Errf("trust %s: %s %q: want a positive duration", t.Issuer, opt, s)
			}
			if v == 0 {
				v = -1 // no skew at all
			}
			*dst = caddy.Duration(v)
			return nil
		}
		many := func(dst *[]string) error {
			if len(args) == 0 {
				return d.Errf("trust %s: %s: want at least one value", t.Issuer, opt)
			}
			*dst = append(*dst, args...)
			return nil
		}
		var err error
		switch opt {
		case "audience":
			err = many(&t.Audience)
		case "algorithms":
			err = many(&t.Algorithms)
		case "clock_skew":
			err = dur(&t.ClockSkew, true)
		case "token_type":
			err = one(&t.TokenType)
		case "authorized_party":
			err = many(&t.AuthorizedParties)
		case "user":
			err = one(&t.UserClaim)
		case "user_prefix":
			err = one(&t.UserPrefix)
		case "models":
			err = many(&t.Models)
		case "grant", "tier":
			// <claim> <value> -> <model>... | <tier>
			if len(args) < 4 || args[2] != "->" || (opt == "tier" && len(args) != 4) {
				want := "<model>...|*"
				if opt == "tier" {
					want = "<tier>"
				}
				return t, d.Errf("trust %s: %s: want <claim> <value> -> %s", t.Issuer, opt, want)
			}
			r := ClaimRule{Claim: args[0], Value: args[1]}
			if opt == "tier" {
				r.Tier = args[3]
				t.Tiers = append(t.Tiers, r)
			} else {
				r.Models = args[3:]
				t.Grants = append(t.Grants, r)
			}
		case "default_tier":
			err = one(&t.DefaultTier)
		case "jwks_uri":
			err = one(&t.JWKSURI)
		case "refresh":
			err = dur(&t.Refresh, false)
		case "min_refresh":
			err = dur(&t.MinRefresh, false)
		case "ca_file":
			err = one(&t.CAFile)
		default:
			return t, d.Errf("trust %s: unrecognized option %q (want audience, algorithms, clock_skew, token_type, "+
				"authorized_party, user, user_prefix, models, grant, tier, default_tier, jwks_uri, refresh, min_refresh or ca_file)",
				t.Issuer, opt)
		}
		if err != nil {
			return t, err
		}
	}
	if len(t.Audience) == 0 {
		return t, d.Errf("trust %s: want an audience line (the aud its tokens carry for this gateway)", t.Issuer)
	}
	if strings.TrimSpace(t.Issuer) != t.Issuer {
		return t, d.Errf("trust %q: the issuer URL has spaces", t.Issuer)
	}
	return t, nil
}

// idpCollector exports the issuers' key caches.
type idpCollector struct{ p *identity.Provider }

var (
	descKeys = prometheus.NewDesc("llmedge_idp_keys", "Verifying keys in use for an identity provider.",
		[]string{"issuer"}, nil)
	descStale = prometheus.NewDesc("llmedge_idp_keys_stale",
		"1 while an identity provider's keys cannot be refreshed and the last known good ones are in use.",
		[]string{"issuer"}, nil)
	descFetches = prometheus.NewDesc("llmedge_idp_key_fetches_total", "Fetches of an identity provider's keys (discovery and JWKS), by result.",
		[]string{"issuer", "result"}, nil)
	descLast = prometheus.NewDesc("llmedge_idp_keys_last_refresh_timestamp_seconds",
		"When an identity provider's keys were last fetched successfully (Unix time; 0 before the first).",
		[]string{"issuer"}, nil)
)

func (c *idpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descKeys
	ch <- descStale
	ch <- descFetches
	ch <- descLast
}

func (c *idpCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.p.Status() {
		stale := 0.0
		if st.Stale {
			stale = 1
		}
		last := 0.0
		if !st.LastRefresh.IsZero() {
			last = float64(st.LastRefresh.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(st.Keys), st.Issuer)
		ch <- prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, stale, st.Issuer)
		ok := uint64(0)
		if st.Fetches > st.Failures {
			ok = st.Fetches - st.Failures
		}
		ch <- prometheus.MustNewConstMetric(descFetches, prometheus.CounterValue, float64(ok), st.Issuer, "ok")
		ch <- prometheus.MustNewConstMetric(descFetches, prometheus.CounterValue, float64(st.Failures), st.Issuer, "error")
		ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, last, st.Issuer)
	}
}

var (
	_ Authenticator         = (*OIDC)(nil)
	_ caddy.Provisioner     = (*OIDC)(nil)
	_ caddy.CleanerUpper    = (*OIDC)(nil)
	_ caddyfile.Unmarshaler = (*OIDC)(nil)
)
