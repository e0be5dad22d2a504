package llmauthenticator

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/identity"
)

func init() { caddy.RegisterModule(MTLS{}) }

// MTLS authenticates machine clients by the client certificate that the
// TLS handshake verified: the site's `tls { client_auth { mode
// require_and_verify; trust_pool ... } }` checks the chain, this maps the
// certificate's name to a user, models and a tier. A request without a
// verified certificate is passed on to the next authenticator.
type MTLS struct {
	// User is which name of the certificate names the user: cn (default),
	// dns, uri or email (the first SAN of that kind).
	User       string `json:"user,omitempty"`
	UserPrefix string `json:"user_prefix,omitempty"`
	// Grants give models to the certificates of a name ("*": any).
	Grants []CertRule `json:"grants,omitempty"`
	// Tiers pick a limits tier by name: the first that matches.
	Tiers []CertRule `json:"tiers,omitempty"`
}

// CertRule is a grant (Models) or tier (Tier) rule of MTLS.
type CertRule struct {
	Name   string   `json:"name"`
	Models []string `json:"models,omitempty"`
	Tier   string   `json:"tier,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (MTLS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".mtls", New: func() caddy.Module { return new(MTLS) }}
}

// Authenticator implements Authenticator.
func (m *MTLS) Authenticator(env Env) (auth.Authenticator, error) {
	cfg := identity.CertConfig{UserFrom: m.User, UserPrefix: m.UserPrefix, Models: env.Models, TierNames: env.Tiers, Realm: env.Realm}
	if env.Credentials != nil {
		cfg.Revoked = env.Credentials.Revoked
	}
	for _, r := range m.Grants {
		cfg.Grants = append(cfg.Grants, identity.CertRule{Name: r.Name, Models: r.Models})
	}
	for _, r := range m.Tiers {
		cfg.Tiers = append(cfg.Tiers, identity.CertRule{Name: r.Name, Tier: r.Tier})
	}
	return identity.NewCertAuth(cfg)
}

// UnmarshalCaddyfile parses
//
//	authenticator mtls {
//		user        cn|dns|uri|email       # default cn
//		user_prefix <prefix>               # e.g. cert:
//		grant       <name>|* -> <model>...|*
//		tier        <name>|* -> <tier>
//	}
func (m *MTLS) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the authenticator's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		args := d.RemainingArgs()
		switch opt {
		case "user", "user_prefix":
			if len(args) != 1 {
				return d.Errf("mtls: %s: want one value", opt)
			}
			if opt == "user" {
				m.User = args[0]
			} else {
				m.UserPrefix = args[0]
			}
		case "grant":
			if len(args) < 3 || args[1] != "->" {
				return d.Errf("mtls: grant: want <name>|* -> <model>...|*")
			}
			m.Grants = append(m.Grants, CertRule{Name: args[0], Models: args[2:]})
		case "tier":
			if len(args) != 3 || args[1] != "->" {
				return d.Errf("mtls: tier: want <name>|* -> <tier>")
			}
			m.Tiers = append(m.Tiers, CertRule{Name: args[0], Tier: args[2]})
		default:
			return d.Errf("mtls: unrecognized option %q (want user, user_prefix, grant or tier)", opt)
		}
	}
	return nil
}

var (
	_ Authenticator         = (*MTLS)(nil)
	_ caddyfile.Unmarshaler = (*MTLS)(nil)
)
