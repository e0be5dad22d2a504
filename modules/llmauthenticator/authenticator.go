// Package llmauthenticator holds the guest modules of namespace
// llmedge.authenticators: how the pipeline checks a request's credential.
// `bearer` checks llmedge's own access tokens and API keys; `oidc` the
// access tokens of trusted OpenID Connect providers (the llmedge block's
// `trust` lines add it); `mtls` verified client certificates. The llmedge
// app loads the authenticators its configuration names, in order
// (`authenticator <name>` lines; bearer alone by default), and asks them
// in turn: the first that knows the request's credential decides. A third
// party adds one (an identity provider's tokens, client certificates) by
// registering a module in this namespace that implements Authenticator.
package llmauthenticator

import (
	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/keep"
)

// Namespace of the authenticator modules.
const Namespace = "llmedge.authenticators"

// Authenticator is a guest module in llmedge.authenticators.
type Authenticator interface {
	caddy.Module
	// Authenticator returns the credential check, built from what the app
	// holds. It answers auth.NotAuthenticated for a request that carries
	// no credential it knows, so that the next one is asked.
	Authenticator(env Env) (auth.Authenticator, error)
}

// Env is what the app gives an authenticator.
type Env struct {
	// Credentials are llmedge's own users, keys and tokens.
	Credentials *auth.Service
	// Realm names the protected space in WWW-Authenticate challenges.
	Realm  string
	Logger *zap.Logger
	// Models are the models served; Tiers the limits tiers defined,
	// which an outside identity may be mapped to.
	Models []string
	Tiers  map[string]bool
	// LocalIssuer is the iss of llmedge's own tokens.
	LocalIssuer string
	// Kept holds what outlives a configuration (the identity providers'
	// key caches).
	Kept *keep.Store
}

func init() { caddy.RegisterModule(Bearer{}) }

// Bearer checks the Bearer credential against llmedge's own access tokens
// and API keys.
type Bearer struct{}

// CaddyModule returns the Caddy module information.
func (Bearer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".bearer", New: func() caddy.Module { return new(Bearer) }}
}

// Authenticator implements Authenticator.
func (Bearer) Authenticator(env Env) (auth.Authenticator, error) {
	return env.Credentials.Authenticator(), nil
}

var _ Authenticator = (*Bearer)(nil)
