package auth

import (
	"context"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
)

// RevokeEndpoint serves POST /auth/revoke, OAuth 2.0 token revocation
// (RFC 7009) for a client's own tokens: form fields token and, optionally,
// token_type_hint. A refresh token (recognised by its form, whatever the
// hint, as §2.1 allows) revokes its whole family — every token of that
// login; an access token is revoked until it expires.
//
// Answers, all with Cache-Control: no-store:
//   - 200 with an empty body when the token is revoked, and also when it
//     is unknown, invalid, expired or already revoked (§2.2: the client
//     cannot do anything more about it, and the answer reveals nothing);
//   - 400 invalid_request without a token, or with a repeated field;
//   - 401 invalid_client when OAuth clients are configured and the
//     request does not authenticate one (as at the token endpoint);
//   - 405, 413 as at the token endpoint;
//   - 503 + Retry-After when the revocation could not be shared with the
//     other instances (§2.2.1); it holds on this one, and a retry shares
//     it.
//
// Possession of the token is what entitles a client to revoke it.
type RevokeEndpoint struct {
	Verifier *Verifier
	// Clients, when it has entries, must vouch for the request's client.
	Clients *Clients
	Realm   string
	// MaxBodyBytes limits the request body (DefaultMaxTokenBodyBytes if 0).
	MaxBodyBytes int64
	// BodyTimeout bounds the reading of the body (DefaultTokenBodyTimeout
	// if 0, none if negative): 408 after.
	BodyTimeout time.Duration
	// Revoke revokes the token with id jti until it expires.
	Revoke func(ctx context.Context, jti string, expires time.Time) error
	// Refresh, when set, holds the refresh tokens a client may revoke.
	Refresh *RefreshTokens
}

// ServeHTTP implements http.Handler.
func (e *RevokeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if err := e.serve(w, r); err != nil {
		err.Write(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (e *RevokeEndpoint) serve(w http.ResponseWriter, r *http.Request) *api.Error {
	if r.Method != http.MethodPost {
		return api.NewError(http.StatusMethodNotAllowed, "Method Not Allowed").WithHeader("Allow", http.MethodPost)
	}
	form, apiErr := (&TokenEndpoint{MaxBodyBytes: e.MaxBodyBytes, BodyTimeout: e.BodyTimeout}).readForm(w, r)
	if apiErr != nil {
		return apiErr
	}
	for _, k := range []string{"token", "token_type_hint", "client_id", "client_secret"} {
		if len(form[k]) > 1 {
			return oauthError(http.StatusBadRequest, "invalid_request", "Parameter "+k+" was given more than once")
		}
	}
	if e.Clients.Required() {
		id, secret, ok := r.BasicAuth()
		if !ok || id == "" {
			id, secret = form.Get("client_id"), form.Get("client_secret")
		}
		if !e.Clients.Check(id, secret) {
			return oauthError(http.StatusUnauthorized, "invalid_client", DetailBadClient).
				WithHeader("WWW-Authenticate", basicChallenge(e.Realm))
		}
	}
	token := form.Get("token")
	if token == "" {
		return oauthError(http.StatusBadRequest, "invalid_request", "The token parameter is required")
	}
	if _, ok := parseRefreshToken(token); ok && e.Refresh != nil {
		if err := e.Refresh.Revoke(r.Context(), token); err != nil {
			return api.NewError(http.StatusServiceUnavailable, "The revocation could not be stored; retry").WithHeader("Retry-After", "1")
		}
		return nil
	}
	p, err := e.Verifier.Verify(token)
	if err != nil || p.TokenID == "" {
		return nil // unknown, invalid, expired or revoked already: nothing to do
	}
	if err := e.Revoke(r.Context(), p.TokenID, p.ExpiresAt); err != nil {
		return api.NewError(http.StatusServiceUnavailable,
			"The revocation could not be shared with every gateway instance; retry").WithHeader("Retry-After", "1")
	}
	return nil
}
