package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
	"github.com/llmedge/llmedge/api"
)

// MaxAuthorizationBytes is the longest Authorization header Bearer
// parses; a longer one is an invalid token, unread.
const MaxAuthorizationBytes = 8 << 10

// FastAPI's details for the Bearer errors.
const (
	DetailNotAuthenticated     = "Not authenticated"
	DetailInvalidToken         = "Could not validate credentials"
	DetailNotEnoughPermissions = "Not enough permissions"
)

// Bearer authenticates r by its RFC 6750 Bearer token, as FastAPI's
// OAuth2PasswordBearer does:
//
//   - no Authorization header, an empty one, or another scheme ("Basic"):
//     401 "Not authenticated", WWW-Authenticate: Bearer realm="<realm>"
//     (no error attribute);
//   - a header over MaxAuthorizationBytes, an empty or malformed token, or
//     one that fails Verify: 401 "Could not validate credentials",
//     WWW-Authenticate: Bearer realm="<realm>", error="invalid_token",
//     error_description="..." (never quoting the token).
//
// The scheme is matched case-insensitively. The principal is to be trusted
// only when the *api.Error is nil.
func Bearer(r *http.Request, v *Verifier, realm string) (*Principal, *api.Error) {
	token, apiErr := BearerToken(r, realm)
	if apiErr != nil {
		return nil, apiErr
	}
	p, err := v.Verify(token)
	if err != nil {
		return nil, invalidToken(realm, DescribeTokenError(err))
	}
	return p, nil
}

// BearerToken returns the request's RFC 6750 Bearer credential, checked
// for form only, or the 401 that Bearer answers without one.
func BearerToken(r *http.Request, realm string) (string, *api.Error) {
	token, apiErr := bearerCredential(r, realm)
	if apiErr == nil && !isB64Token(token) {
		return "", malformed(realm)
	}
	return token, apiErr
}

// malformed is the 401 of a credential that is not a b64token.
func malformed(realm string) *api.Error {
	return invalidToken(realm, "the access token is malformed")
}

// bearerCredential is BearerToken without the check of the token's
// characters, for a caller that knows the token already (a verified one
// it cached, whose bytes passed the check then).
func bearerCredential(r *http.Request, realm string) (string, *api.Error) {
	values := r.Header["Authorization"] // the key as net/http keeps it: Values would build it again
	if len(values) == 0 || (len(values) == 1 && strings.TrimSpace(values[0]) == "") {
		return "", NotAuthenticated(realm)
	}
	if len(values) > 1 {
		return "", invalidToken(realm, "more than one Authorization header")
	}
	h := values[0]
	if len(h) > MaxAuthorizationBytes {
		return "", invalidToken(realm, "Authorization header too long")
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", NotAuthenticated(realm)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", invalidToken(realm, "the access token is missing")
	}
	return token, nil
}

// Forbidden is the 403 answer for a valid token that lacks scope:
// "Not enough permissions: missing scope model:qwen", with
// WWW-Authenticate: Bearer realm="<realm>", error="insufficient_scope",
// scope="model:qwen".
func Forbidden(realm, scope string) *api.Error {
	return api.NewError(http.StatusForbidden, DetailNotEnoughPermissions+": missing scope "+scope).
		WithHeader("WWW-Authenticate", challenge(realm,
			"error", "insufficient_scope", "scope", scope))
}

// NotAuthenticated is the 401 for a request without credentials an
// authenticator knows: the challenge of its realm, no error.
func NotAuthenticated(realm string) *api.Error {
	return api.NewError(http.StatusUnauthorized, DetailNotAuthenticated).
		WithHeader("WWW-Authenticate", challenge(realm))
}

// InvalidToken is the 401 for a bad credential: Bearer error
// "invalid_token" with desc, which must be a fixed text (never the token).
func InvalidToken(realm, desc string) *api.Error { return invalidToken(realm, desc) }

// invalidToken is the 401 for a bad token; desc must be a fixed text.
func invalidToken(realm, desc string) *api.Error {
	return api.NewError(http.StatusUnauthorized, DetailInvalidToken).
		WithHeader("WWW-Authenticate", challenge(realm,
			"error", "invalid_token", "error_description", desc))
}

// DescribeTokenError maps a Verify error to a fixed error_description, so
// nothing of the token itself is echoed.
func DescribeTokenError(err error) string {
	switch {
	case errors.Is(err, ErrRevoked):
		return "the access token was revoked"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the access token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the access token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer), errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the access token was issued for another service"
	case errors.Is(err, ErrUnknownKey), errors.Is(err, jwt.ErrTokenSignatureInvalid),
		errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the access token signature is invalid"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the access token is malformed"
	}
	return "the access token is invalid"
}

// challenge builds a WWW-Authenticate value: Bearer realm="...", then the
// given name/value pairs as quoted strings. An empty realm is left out.
func challenge(realm string, params ...string) string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	add := func(k, v string) {
		b.WriteString(sep)
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(quoteEscape(v))
		b.WriteString(`"`)
		sep = ", "
	}
	if realm != "" {
		add("realm", realm)
	}
	for i := 0; i+1 < len(params); i += 2 {
		add(params[i], params[i+1])
	}
	return b.String()
}

// quoteEscape escapes v for an HTTP quoted-string and drops control
// characters, which a header may not carry.
func quoteEscape(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < ' ' || r == 0x7f:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isB64Token reports whether s matches RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		if !b64TokenChars[body[i]] {
			return false
		}
	}
	return true
}

// b64TokenChars are the characters of a b64token before its padding; a
// table, as every request's credential is scanned.
var b64TokenChars = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
	}
	return t
}()

// BearerAuth authenticates requests by their Bearer credential: an access
// token (a JWT), or, when APIKeys is set, an API key ("llme_…"). The
// prefix tells them apart: a JWT always starts with "eyJ".
type BearerAuth struct {
	Verifier *Verifier
	Realm    string
	// APIKeys, when set, are accepted as Bearer credentials too; a key's
	// principal has its models as scopes.
	APIKeys *APIKeys
	// Foreign, when set, reports whether another authenticator of the
	// chain claims the token: one it verified before, or a JWT whose
	// (unverified) iss is an issuer it trusts (never ours). Such a token
	// is passed on: Authenticate answers NotAuthenticated, so the chain
	// asks the next. Every other token is verified here, and a bad one is
	// refused at once.
	Foreign func(token string) bool

	passOnce sync.Once
	passErr  api.Error
}

// passOn is NotAuthenticated for a token another authenticator claims,
// built once: every request with such a token passes through here, and
// the next authenticator decides. Its Headers are shared: read only.
func (b *BearerAuth) passOn() *api.Error {
	b.passOnce.Do(func() { b.passErr = *NotAuthenticated(b.Realm) })
	e := b.passErr
	return &e
}

// Authenticate returns the credential's principal, or the 401 to answer.
func (b *BearerAuth) Authenticate(r *http.Request) (*Principal, *api.Error) {
	token, apiErr := bearerCredential(r, b.Realm)
	if apiErr != nil {
		return nil, apiErr
	}
	// A token verified before is answered from the cache before its
	// characters are scanned: the lookup is a hash, the scan a few
	// thousand instructions for a JWT, on every request. (An API key or a
	// refresh token is never in it.)
	if p, err, cached := b.Verifier.verifyCached(token, nowFunc(b.Verifier.Now)()); cached {
		if err != nil {
			return nil, invalidToken(b.Realm, DescribeTokenError(err))
		}
		return p, nil
	}
	if !isB64Token(token) {
		return nil, malformed(b.Realm)
	}
	switch {
	case b.APIKeys != nil && IsAPIKey(token):
		p, err := b.APIKeys.Verify(token)
		if err != nil {
			desc := "the API key is invalid or revoked"
			if errors.Is(err, ErrAPIKeyExpired) {
				desc = "the API key expired"
			}
			return nil, invalidToken(b.Realm, desc)
		}
		return p, nil
	case strings.HasPrefix(token, RefreshTokenPrefix):
		// A client mixing up its tokens deserves a clear answer.
		return nil, invalidToken(b.Realm, "a refresh token is not an access token")
	}
	if b.Foreign != nil && b.Foreign(token) {
		return nil, b.passOn()
	}
	p, err := b.Verifier.Verify(token)
	if err != nil {
		return nil, invalidToken(b.Realm, DescribeTokenError(err))
	}
	return p, nil
}

// PeekIssuer reads a compact JWS's iss claim without verifying anything,
// to tell which verifier a token is for.
func PeekIssuer(token string) (string, bool) {
	_, rest, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	payload, _, ok := strings.Cut(rest, ".")
	if !ok || len(payload) > MaxTokenBytes {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", false
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil || c.Iss == "" {
		return "", false
	}
	return c.Iss, true
}
