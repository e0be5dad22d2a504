package llmapp

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/modules/llmadmitter"
	"github.com/llmedge/llmedge/modules/llmauthenticator"
	"github.com/llmedge/llmedge/tenancy"
)

// authenticators loads the credential checks (guest modules), bearer when
// none is named, and chains them in order.
func (a *App) authenticators(ctx caddy.Context) (auth.Authenticator, error) {
	if len(a.AuthenticatorsRaw) == 0 {
		a.AuthenticatorsRaw = append(a.AuthenticatorsRaw, moduleObject("authenticator", "bearer"))
	}
	if len(a.Trusts) > 0 {
		// The trust lines' sugar: an oidc authenticator after the others.
		a.AuthenticatorsRaw = append(a.AuthenticatorsRaw,
			caddyconfig.JSONModuleObject(a.trustAuthenticator(), "authenticator", "oidc", nil))
		a.Trusts = nil // now in the list, should the app be provisioned again
	}
	env := llmauthenticator.Env{Credentials: a.creds, Realm: Realm, Logger: a.logger,
		Models: a.modelNames(), Tiers: a.tierNames(), LocalIssuer: a.Issuer, Kept: kept}
	mods, err := loadGuests(ctx, a, "AuthenticatorsRaw", a.AuthenticatorsRaw, "authenticator", llmauthenticator.Namespace, "authenticator")
	if err != nil {
		return nil, err
	}
	var chain auth.Chain
	for _, mod := range mods {
		g, ok := mod.(llmauthenticator.Authenticator)
		if !ok {
			return nil, fmt.Errorf("authenticator: module %T is not an llmauthenticator.Authenticator", mod)
		}
		au, err := g.Authenticator(env)
		if err != nil {
			return nil, fmt.Errorf("authenticator %s: %w", g.CaddyModule().ID.Name(), err)
		}
		chain = append(chain, au)
	}
	if err := a.reserveNamespaces(chain); err != nil {
		return nil, err
	}
	a.credHeaders = credentialHeaders(chain)
	a.trustOutside(chain, mods)
	if len(chain) == 1 {
		return chain[0], nil // no chain to walk on the hot path
	}
	return chain, nil
}

// admitters loads the admission rules (guest modules), limits when none
// is named, and chains those that check something; nil when none does,
// so the admission stage costs requests nothing.
func (a *App) admitters(ctx caddy.Context) (tenancy.Admitter, error) {
	if len(a.AdmittersRaw) == 0 {
		a.AdmittersRaw = append(a.AdmittersRaw, moduleObject("admitter", "limits"))
	}
	env := llmadmitter.Env{Tenancy: a.tenants, Logger: a.logger}
	mods, err := loadGuests(ctx, a, "AdmittersRaw", a.AdmittersRaw, "admitter", llmadmitter.Namespace, "admitter")
	if err != nil {
		return nil, err
	}
	var chain tenancy.Admitters
	for _, mod := range mods {
		g, ok := mod.(llmadmitter.Admitter)
		if !ok {
			return nil, fmt.Errorf("admitter: module %T is not an llmadmitter.Admitter", mod)
		}
		ad, err := g.Admitter(env)
		if err != nil {
			return nil, fmt.Errorf("admitter %s: %w", g.CaddyModule().ID.Name(), err)
		}
		if ad != nil {
			chain = append(chain, ad)
		}
	}
	switch len(chain) {
	case 0:
		return nil, nil
	case 1:
		return chain[0], nil
	}
	return chain, nil
}
