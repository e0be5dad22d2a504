package guests

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/modules/llmauthenticator"
)

func init() { caddy.RegisterModule(SharedSecret{}) }

// SharedSecret (llmedge.authenticators.shared_secret) lets trusted
// machines (a CI job, an internal service) in with a long-lived secret in
// a header of their own, beside llmedge's Bearer tokens:
//
//	llmedge {
//		authenticator shared_secret {
//			header X-Gateway-Token
//			secret {env.CI_GATEWAY_TOKEN} ci-bot qwen gemma
//		}
//		authenticator bearer
//		...
//	}
//
// Each secret maps to a user (the subject that limits, logs and metrics
// name) and the models it may use (scopes model:<name>). The header's
// value is compared with every secret in constant time (as SHA-256
// digests, so neither a secret's content nor its length leaks through
// timing). A request without the header is not this authenticator's
// business: it answers auth.NotAuthenticated, and the chain asks the next
// one (bearer above). A request with the header and a wrong value is
// refused at once with 401 invalid_token: it does not fall through to
// another authenticator.
type SharedSecret struct {
	// Header carries the secret; default X-Gateway-Token.
	Header string `json:"header,omitempty"`
	// Secrets are the accepted secrets and whom each stands for.
	Secrets []Secret `json:"secrets"`
}

// Secret is one accepted secret.
type Secret struct {
	// Value is the secret; placeholders such as {env.CI_GATEWAY_TOKEN}
	// are replaced when the configuration loads. At least 16 characters.
	Value string `json:"value"`
	// User is the subject of requests that present it.
	User string `json:"user"`
	// Models it may use.
	Models []string `json:"models"`
}

// DefaultSecretHeader is the header SharedSecret reads unless told.
const DefaultSecretHeader = "X-Gateway-Token"

// minSecretLen keeps guessable values out of the configuration.
const minSecretLen = 16

// CaddyModule returns the Caddy module information.
func (SharedSecret) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  llmauthenticator.Namespace + ".shared_secret",
		New: func() caddy.Module { return new(SharedSecret) },
	}
}

// Validate checks the secrets as written (a placeholder is checked once
// replaced, in Authenticator).
func (s *SharedSecret) Validate() error {
	if len(s.Secrets) == 0 {
		return fmt.Errorf("shared_secret: no secret configured")
	}
	for i, sec := range s.Secrets {
		if sec.Value == "" || sec.User == "" || len(sec.Models) == 0 {
			return fmt.Errorf("shared_secret: secret %d: want a value, a user and at least one model", i+1)
		}
	}
	return nil
}

// Authenticator implements llmauthenticator.Authenticator.
func (s *SharedSecret) Authenticator(env llmauthenticator.Env) (auth.Authenticator, error) {
	a := &secretAuth{header: textproto.CanonicalMIMEHeaderKey(s.Header), realm: env.Realm}
	if a.header == "" {
		a.header = DefaultSecretHeader
	}
	repl := caddy.NewReplacer()
	seen := map[[sha256.Size]byte]bool{}
	for i, sec := range s.Secrets {
		value := repl.ReplaceAll(sec.Value, "")
		if len(value) < minSecretLen {
			return nil, fmt.Errorf("shared_secret: secret %d (user %s) is shorter than %d characters", i+1, sec.User, minSecretLen)
		}
		digest := sha256.Sum256([]byte(value))
		if seen[digest] {
			return nil, fmt.Errorf("shared_secret: secret %d (user %s) is configured twice", i+1, sec.User)
		}
		seen[digest] = true
		scopes := make([]string, len(sec.Models))
		for j, m := range sec.Models {
			scopes[j] = auth.ModelScope(m)
		}
		a.keys = append(a.keys, secretKey{digest: digest, user: sec.User, scopes: scopes})
	}
	return a, nil
}

// UnmarshalCaddyfile parses
//
//	authenticator shared_secret {
//		header <name>
//		secret <value> <user> <model>...
//	}
func (s *SharedSecret) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the authenticator's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "header":
			if !d.NextArg() {
				return d.Errf("shared_secret header: want a header name")
			}
			s.Header = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		case "secret":
			args := d.RemainingArgs()
			if len(args) < 3 {
				return d.Errf("shared_secret secret: want <value> <user> <model>...")
			}
			s.Secrets = append(s.Secrets, Secret{Value: args[0], User: args[1], Models: args[2:]})
		default:
			return d.Errf("unrecognized shared_secret option %q", d.Val())
		}
	}
	return s.Validate()
}

// secretAuth is the credential check (auth.Authenticator).
type secretAuth struct {
	header string
	realm  string
	keys   []secretKey
}

type secretKey struct {
	digest [sha256.Size]byte
	user   string
	scopes []string
}

// Authenticate implements auth.Authenticator.
func (a *secretAuth) Authenticate(r *http.Request) (*auth.Principal, *api.Error) {
	values := r.Header.Values(a.header)
	if len(values) == 0 {
		return nil, auth.NotAuthenticated(a.realm) // the next authenticator's turn
	}
	if len(values) > 1 {
		return nil, a.invalid("more than one " + a.header + " header")
	}
	digest := sha256.Sum256([]byte(values[0]))
	found := -1
	for i := range a.keys { // every key, whichever matches: no early exit
		if subtle.ConstantTimeCompare(digest[:], a.keys[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, a.invalid("the " + a.header + " value is not a known secret")
	}
	k := a.keys[found]
	return &auth.Principal{Subject: k.user, Scopes: k.scopes}, nil
}

// CredentialHeaders names the header the secret comes in: the gateway
// redacts it in every log (llmapp.CredentialHeaderReader).
func (a *secretAuth) CredentialHeaders() []string { return []string{a.header} }

// invalid is the 401 for a wrong secret: llmedge's own invalid_token
// answer, with the realm's challenge. desc is a fixed text, never the
// value the client sent.
func (a *secretAuth) invalid(desc string) *api.Error {
	return api.NewError(http.StatusUnauthorized, auth.DetailInvalidToken).
		WithHeader("WWW-Authenticate", "Bearer realm="+strconv.Quote(a.realm)+
			`, error="invalid_token", error_description=`+strconv.Quote(desc))
}

// Interface guards.
var (
	_ llmauthenticator.Authenticator = (*SharedSecret)(nil)
	_ caddy.Validator                = (*SharedSecret)(nil)
	_ caddyfile.Unmarshaler          = (*SharedSecret)(nil)
	_ auth.Authenticator             = (*secretAuth)(nil)
)
