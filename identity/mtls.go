package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// CertProvider is the Provider of principals from client certificates:
// their chain is verified by the TLS server (Caddy's client_auth, mode
// require_and_verify or verify_if_given, with the operator's trust
// pool).
const CertProvider = "mtls"

// Which name of a certificate names its user.
const (
	NameCN    = "cn"    // the subject's common name
	NameDNS   = "dns"   // the first DNS SAN
	NameURI   = "uri"   // the first URI SAN (a SPIFFE ID, ...)
	NameEmail = "email" // the first email SAN
)

// CertRule grants models, and picks a tier, for the certificates whose
// name is Name ("*": any verified certificate).
type CertRule struct {
	Name   string
	Models []string
	Tier   string
}

// CertConfig configures a CertAuth.
type CertConfig struct {
	// UserFrom is which name of the certificate names the user (NameCN
	// by default).
	UserFrom string
	// UserPrefix starts every user name ("cert:"), so a certificate's user
	// cannot share a name, limits or revocations with a local user.
	UserPrefix string
	// Grants add models by name: every rule whose Name is the
	// certificate's, or "*".
	Grants []CertRule
	// Tiers: the first rule whose Name matches picks the tier.
	Tiers []CertRule
	// Models are every model served; Tiers the tiers defined.
	Models    []string
	TierNames map[string]bool
	// Revoked, when set, refuses the certificates of a revoked user
	// issued (NotBefore) before the revocation.
	Revoked func(p *auth.Principal) bool
	Realm   string
}

// CertAuth authenticates requests by the client certificate that the TLS
// handshake verified.
type CertAuth struct {
	cfg CertConfig
}

// NewCertAuth checks cfg.
func NewCertAuth(cfg CertConfig) (*CertAuth, error) {
	switch cfg.UserFrom {
	case "":
		cfg.UserFrom = NameCN
	case NameCN, NameDNS, NameURI, NameEmail:
	default:
		return nil, fmt.Errorf("mtls: user %q: want cn, dns, uri or email", cfg.UserFrom)
	}
	for _, r := range cfg.Grants {
		if r.Name == "" || len(r.Models) == 0 {
			return nil, fmt.Errorf("mtls: grant: want <name>|* -> <model>...")
		}
		for _, m := range r.Models {
			if m != "*" && !slices.Contains(cfg.Models, m) {
				return nil, fmt.Errorf("mtls: grant %s: model %q is not a configured model", r.Name, m)
			}
		}
	}
	for _, r := range cfg.Tiers {
		if r.Name == "" || !cfg.TierNames[r.Tier] {
			return nil, fmt.Errorf("mtls: tier %s -> %s: the tier is not defined", r.Name, r.Tier)
		}
	}
	if cfg.UserPrefix == "" {
		cfg.UserPrefix = DefaultUserPrefix(CertProvider)
	}
	return &CertAuth{cfg: cfg}, nil
}

// Namespaces are the names the certificates' users take (package auth:
// no local user, no other source, may take one).
func (c *CertAuth) Namespaces() []auth.Namespace {
	return []auth.Namespace{{Source: CertProvider, Prefix: c.cfg.UserPrefix}}
}

var errCertName = errors.New("the client certificate has no usable name")

// Authenticate implements auth.Authenticator: a request over a
// connection whose client certificate the server verified gets the
// certificate's principal; any other gets auth.NotAuthenticated (a
// certificate presented but not verified counts as none).
func (c *CertAuth) Authenticate(r *http.Request) (*auth.Principal, *api.Error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, auth.NotAuthenticated(c.cfg.Realm)
	}
	p, err := c.Principal(r.TLS.VerifiedChains[0][0])
	if err != nil {
		return nil, auth.InvalidToken(c.cfg.Realm, err.Error())
	}
	if c.cfg.Revoked != nil && c.cfg.Revoked(p) {
		return nil, auth.InvalidToken(c.cfg.Realm, "the client certificate's user was revoked")
	}
	return p, nil
}

// Principal maps a verified leaf certificate; its errors are fixed texts.
func (c *CertAuth) Principal(cert *x509.Certificate) (*auth.Principal, error) {
	name := certName(cert, c.cfg.UserFrom)
	if name == "" || len(c.cfg.UserPrefix)+len(name) > MaxUserBytes ||
		strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) }) >= 0 {
		return nil, errCertName
	}
	var models []string
	for _, r := range c.cfg.Grants {
		if r.Name == "*" || r.Name == name {
			for _, m := range r.Models {
				if m == "*" {
					models = append(models, c.cfg.Models...)
				} else {
					models = append(models, m)
				}
			}
		}
	}
	scopes := make([]string, 0, len(models))
	for _, m := range models {
		scopes = append(scopes, auth.ModelScope(m))
	}
	slices.Sort(scopes)
	p := &auth.Principal{
		Subject:   c.cfg.UserPrefix + name,
		Scopes:    slices.Compact(scopes),
		ExpiresAt: cert.NotAfter,
		IssuedAt:  cert.NotBefore,
		Provider:  CertProvider,
	}
	for _, r := range c.cfg.Tiers {
		if r.Name == "*" || r.Name == name {
			p.Tier = r.Tier
			break
		}
	}
	return p, nil
}

func certName(cert *x509.Certificate, from string) string {
	switch from {
	case NameDNS:
		if len(cert.DNSNames) > 0 {
			return cert.DNSNames[0]
		}
	case NameURI:
		if len(cert.URIs) > 0 {
			return cert.URIs[0].String()
		}
	case NameEmail:
		if len(cert.EmailAddresses) > 0 {
			return cert.EmailAddresses[0]
		}
	default:
		return cert.Subject.CommonName
	}
	return ""
}

var _ auth.Authenticator = (*CertAuth)(nil)
