package auth

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/llmedge/llmedge/api"
)

// Token exchange (RFC 8693): an identity provider's token in, a
// short-lived llmedge token (and a refresh token) out.
const (
	GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT           = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken       = "urn:ietf:params:oauth:token-type:id_token"
	// DefaultExchangeRefreshTTL bounds how long the refresh tokens of an
	// exchanged login work (the refresh TTL when shorter): an identity
	// provider's user is checked by the provider again after that.
	DefaultExchangeRefreshTTL = 12 * time.Hour
)

// exchangeFields may each be given once.
var exchangeFields = []string{"subject_token", "subject_token_type", "requested_token_type", "audience",
	"resource", "actor_token", "actor_token_type"}

// SubjectTokenVerifier checks the subject token of a token exchange: an
// identity provider's token (package identity).
type SubjectTokenVerifier interface {
	// VerifySubjectToken reports known false for a token of no issuer it
	// trusts; otherwise the principal, or a fixed description of why the
	// token is refused (never quoting it).
	VerifySubjectToken(token string) (known bool, p *Principal, refused string)
}

// Details of the token exchange's answers.
const (
	detailExchangeOff        = "Token exchange is not enabled on this server (trust an identity provider)"
	detailExchangeUntrusted  = "The subject token was not issued by a trusted identity provider"
	detailExchangeTokenType  = "Unsupported subject_token_type (want an access token, a JWT or an ID token)"
	detailExchangeRequested  = "Unsupported requested_token_type (this server issues access tokens)"
	detailExchangeActor      = "Delegation (actor_token) is not supported"
	detailExchangeTarget     = "The token cannot be issued for that audience or resource"
	detailExchangeMissingTok = "Missing parameter: subject_token"
	detailExchangeMissingTyp = "Missing parameter: subject_token_type"
)

// exchangeForm is a validated token exchange request.
type exchangeForm struct {
	subjectToken string
	scope        string
	audience     []string
	resource     []string
}

// validateExchange applies RFC 8693 §2.1 to the form.
func validateExchange(form url.Values) (*exchangeForm, *api.Error) {
	for _, k := range exchangeFields {
		if k != "audience" && k != "resource" && len(form[k]) > 1 {
			return nil, oauthError(http.StatusBadRequest, "invalid_request", "Parameter "+k+" was given more than once")
		}
	}
	switch {
	case form.Get("subject_token") == "":
		return nil, oauthError(http.StatusBadRequest, "invalid_request", detailExchangeMissingTok)
	case form.Get("subject_token_type") == "":
		return nil, oauthError(http.StatusBadRequest, "invalid_request", detailExchangeMissingTyp)
	case form.Get("actor_token") != "" || form.Get("actor_token_type") != "":
		return nil, oauthError(http.StatusBadRequest, "invalid_request", detailExchangeActor)
	}
	switch form.Get("subject_token_type") {
	case TokenTypeAccessToken, TokenTypeJWT, TokenTypeIDToken:
	default:
		return nil, oauthError(http.StatusBadRequest, "invalid_request", detailExchangeTokenType)
	}
	switch form.Get("requested_token_type") {
	case "", TokenTypeAccessToken, TokenTypeJWT:
	default:
		return nil, oauthError(http.StatusBadRequest, "invalid_request", detailExchangeRequested)
	}
	return &exchangeForm{subjectToken: form.Get("subject_token"), scope: form.Get("scope"),
		audience: form["audience"], resource: form["resource"]}, nil
}

// exchange serves the token exchange grant: the subject token is checked
// by the first verifier that knows its issuer, the audience asked for
// must be llmedge's (a resource is refused: llmedge is named by its
// audience), the scope asked for must be among the
// identity's; the llmedge token issued lives no longer than the subject
// token, and its refresh tokens DefaultExchangeRefreshTTL at most.
func (e *TokenEndpoint) exchange(ctx context.Context, f *exchangeForm, clientID, addr string) (*TokenResponse, *api.Error) {
	for _, a := range f.audience {
		if a != e.Issuer.Audience && a != e.Issuer.Issuer {
			return nil, oauthError(http.StatusBadRequest, "invalid_target", detailExchangeTarget)
		}
	}
	if len(f.resource) > 0 {
		// llmedge's tokens name it by its audience, not by a URL.
		return nil, oauthError(http.StatusBadRequest, "invalid_target", detailExchangeTarget)
	}
	var p *Principal
	refused := detailExchangeUntrusted
	for _, v := range e.Exchange {
		if known, principal, why := v.VerifySubjectToken(f.subjectToken); known {
			p, refused = principal, why
			break
		}
	}
	if p == nil || refused != "" {
		e.AddrLimiter.Fail(addr)
		if refused == "" {
			refused = detailExchangeUntrusted
		}
		return nil, oauthError(http.StatusBadRequest, "invalid_grant", "Invalid subject token: "+refused)
	}
	granted, apiErr := narrowScopes(slices.Clone(p.Scopes), f.scope, "Requested scope is not allowed: ")
	if apiErr != nil {
		return nil, apiErr
	}
	out := &Principal{Subject: p.Subject, Scopes: granted, Tier: p.Tier, Provider: p.Provider}
	ttl := time.Until(p.ExpiresAt)
	if e.Issuer.Now != nil {
		ttl = p.ExpiresAt.Sub(e.Issuer.Now())
	}
	if ttl < time.Second {
		return nil, oauthError(http.StatusBadRequest, "invalid_grant", "Invalid subject token: "+DescribeTokenError(jwt.ErrTokenExpired))
	}
	resp, apiErr := e.issueFor(out, ttl)
	if apiErr != nil {
		return nil, apiErr
	}
	resp.IssuedTokenType = TokenTypeAccessToken
	if e.Refresh != nil {
		rt, _, err := e.Refresh.Issue(ctx, RefreshGrant{User: out.Subject, Scopes: granted, ClientID: clientID,
			Tier: out.Tier, Provider: out.Provider, TTL: DefaultExchangeRefreshTTL})
		if err != nil {
			e.reportError(err)
		}
		resp.RefreshToken = rt
	}
	return resp, nil
}
