package llmapp

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/identity"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/modules/llmauthenticator"
	"github.com/llmedge/llmedge/status"
)

// TierConfig is a `tier <name> { ... }` block: the limits of the
// identity providers' users (and client certificates) mapped to it.
type TierConfig struct {
	limits.Limit
	// Weight is the tier's users' share in a model's fair wait queue:
	// while users wait, one of weight 2 is served about twice the tokens
	// of one of weight 1. Default 1.
	Weight float64 `json:"weight,omitempty"`
	// Priority is the class of work of the tier's users' requests under
	// overload: critical, standard (default) or sheddable.
	Priority string `json:"priority,omitempty"`
	// CapsConfig tightens the models' bounds on one request for the
	// tier's users.
	CapsConfig
}

// identityStatus is an authenticator that reports trusted issuers' keys.
type identityStatus interface {
	IdentityStatus() []identity.SourceStatus
}

// tierNames are the tiers defined, for the authenticators' mappings.
func (a *App) tierNames() map[string]bool {
	names := make(map[string]bool, len(a.Tiers))
	for name := range a.Tiers {
		names[name] = true
	}
	return names
}

// tierLimits are the tiers' limits, for the limits admitter.
func (a *App) tierLimits() map[string]limits.Limit {
	if len(a.Tiers) == 0 {
		return nil
	}
	out := make(map[string]limits.Limit, len(a.Tiers))
	for name, t := range a.Tiers {
		out[name] = t.Limit
	}
	return out
}

// tierShares are the tiers' weights in the fair wait queue; nil when
// every tier has the default.
func (a *App) tierShares() map[string]float64 {
	var out map[string]float64
	for name, t := range a.Tiers {
		if t.Weight > 0 && t.Weight != 1 {
			if out == nil {
				out = map[string]float64{}
			}
			out[name] = t.Weight
		}
	}
	return out
}

// trustOutside wires the authenticators of outside identities into the
// credentials: bearer passes on the tokens of their issuers, and the token
// endpoint exchanges them; their key caches are reported.
func (a *App) trustOutside(authns []auth.Authenticator, mods []any) {
	var exchange []auth.SubjectTokenVerifier
	var trusting []interface{ Claims(token string) bool }
	for _, au := range authns {
		if x, ok := au.(auth.SubjectTokenVerifier); ok {
			exchange = append(exchange, x)
		}
		if t, ok := au.(interface{ Claims(token string) bool }); ok {
			trusting = append(trusting, t)
		}
	}
	for _, m := range mods {
		if s, ok := m.(identityStatus); ok {
			a.idps = append(a.idps, s)
		} else {
			a.otherWays++
		}
	}
	if len(trusting) == 0 && len(exchange) == 0 {
		return
	}
	var foreign func(string) bool
	if len(trusting) > 0 {
		foreign = func(token string) bool {
			for _, t := range trusting {
				if t.Claims(token) {
					return true
				}
			}
			return false
		}
	}
	a.creds.TrustOutside(foreign, exchange)
}

// reserveNamespaces gives each outside source's principals their
// namespace (their user prefix): the load fails when two sources' overlap
// or a local user's name lies in one, naming both (auth.Namespace).
func (a *App) reserveNamespaces(authns []auth.Authenticator) error {
	var ns []auth.Namespace
	for _, au := range authns {
		if s, ok := au.(interface{ Namespaces() []auth.Namespace }); ok {
			ns = append(ns, s.Namespaces()...)
		}
	}
	if err := a.creds.Users().Reserve(ns); err != nil {
		return fmt.Errorf("principals: %w", err)
	}
	return nil
}

// identityStatuses are every trusted issuer's keys.
func (a *App) identityStatuses() []identity.SourceStatus {
	var out []identity.SourceStatus
	for _, s := range a.idps {
		out = append(out, s.IdentityStatus()...)
	}
	return out
}

// identityDependencies report each trusted issuer in /readyz: "degraded"
// while its keys cannot be refreshed (its users are served with the last
// known good keys, or refused when there are none yet).
func (a *App) identityDependencies() []gateway.Dependency {
	var deps []gateway.Dependency
	for _, st := range a.identityStatuses() {
		issuer := st.Issuer
		deps = append(deps, gateway.DependencyFunc{
			Dependency: "identity provider " + issuer,
			Func: func() gateway.DependencyStatus {
				for _, st := range a.identityStatuses() {
					if st.Issuer == issuer {
						if st.Error == "" {
							return gateway.DependencyStatus{Status: "up"}
						}
						return gateway.DependencyStatus{Status: "degraded", Detail: identityLine(st)}
					}
				}
				return gateway.DependencyStatus{Status: "up"}
			},
		})
	}
	return deps
}

// credentialsDependency makes the instance unready while nobody can be
// let in: when every authenticator is an identity provider's (no bearer,
// no mtls) and none of the trusted issuers' keys were ever fetched. An
// issuer without keys beside another way in only degrades the instance:
// its users are refused, everyone else is served.
func (a *App) credentialsDependency() []gateway.Dependency {
	if a.otherWays > 0 || len(a.idps) == 0 {
		return nil
	}
	return []gateway.Dependency{gateway.DependencyFunc{Dependency: "credentials", Func: func() gateway.DependencyStatus {
		return credentialsStatus(a.identityStatuses())
	}}}
}

// credentialsStatus is "up" when one issuer has keys, else "down".
func credentialsStatus(issuers []identity.SourceStatus) gateway.DependencyStatus {
	var waiting []string
	for _, st := range issuers {
		if st.Keys > 0 {
			return gateway.DependencyStatus{Status: "up"}
		}
		waiting = append(waiting, st.Issuer)
	}
	return gateway.DependencyStatus{Status: "down",
		Detail: "no way in: the only authenticators are identity providers, and no keys were fetched yet from " + strings.Join(waiting, ", ")}
}

// identityLine says in a sentence how an issuer's keys are.
func identityLine(st identity.SourceStatus) string {
	switch {
	case st.Error == "":
		return st.Issuer + ": " + strconv.Itoa(st.Keys) + " keys, refreshed " + st.LastRefresh.UTC().Format(time.RFC3339)
	case st.Keys > 0:
		return fmt.Sprintf("%s: unreachable since %s (%s); its users are served with the %d keys fetched %s",
			st.Issuer, st.FailingSince.UTC().Format(time.RFC3339), st.Error, st.Keys, st.LastRefresh.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: no keys yet (%s); its users are refused until they arrive", st.Issuer, st.Error)
}

// identityProviders is the status page's view of the trusted issuers.
func (a *App) identityProviders() []status.IdentityProvider {
	var out []status.IdentityProvider
	for _, st := range a.identityStatuses() {
		ip := status.IdentityProvider{Issuer: st.Issuer, Keys: st.Keys, Stale: st.Stale, Error: st.Error, Line: identityLine(st)}
		if !st.LastRefresh.IsZero() {
			t := st.LastRefresh
			ip.LastRefresh = &t
		}
		out = append(out, ip)
	}
	return out
}

// trustAuthenticator is the oidc authenticator the `trust` lines add.
func (a *App) trustAuthenticator() *llmauthenticator.OIDC {
	return &llmauthenticator.OIDC{Trusts: a.Trusts}
}
