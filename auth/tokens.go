package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/llmedge/llmedge/api"
)

// DefaultTTL is the lifetime of issued tokens when Issuer.TTL is zero.
const DefaultTTL = time.Hour

// MaxTokenBytes is the longest token Verify parses; longer ones are
// rejected unread.
const MaxTokenBytes = 8 << 10

// ScopePrefix starts every model scope.
const ScopePrefix = "model:"

// ModelScope returns the scope that grants access to a model type:
// "model:" + modelType.
func ModelScope(modelType string) string { return ScopePrefix + modelType }

// Errors of Verify, to be told apart with errors.Is. Verify's errors
// may also wrap golang-jwt's (jwt.ErrTokenExpired, ...).
var (
	ErrUnknownKey = errors.New("auth: token signed with an unknown key")
	ErrNoSubject  = errors.New("auth: token has no subject")
	// ErrRevoked: the token, or every token of its user issued before
	// it, was revoked, or its user is disabled.
	ErrRevoked = errors.New("auth: token revoked")
)

// claims is the JWT payload of an access token.
type claims struct {
	jwt.RegisteredClaims
	// Scope is the space-separated list of granted scopes (RFC 8693 §4.2).
	Scope string `json:"scope,omitempty"`
	// Tier and Provider carry an outside identity's limits tier and
	// issuer into the llmedge token a token exchange issues.
	Tier     string `json:"llmedge_tier,omitempty"`
	Provider string `json:"llmedge_idp,omitempty"`
}

// Issuer signs access tokens with the ring's active key.
type Issuer struct {
	Keys     *KeyRing
	Issuer   string // iss; required
	Audience string // aud; required
	TTL      time.Duration
	Now      func() time.Time // time.Now when nil
}

// Issue returns a JWT signed by the ring's active key for subject with the given scopes,
// and its expiry. The header carries the key's kid; the claims are iss,
// aud, sub, scope (space-separated), iat, nbf, exp and a random jti.
// Times are whole seconds, so exp - iat is exactly the TTL.
func (i *Issuer) Issue(subject string, scopes []string) (token string, expiresAt time.Time, err error) {
	return i.IssueFor(&Principal{Subject: subject, Scopes: scopes}, 0)
}

// IssueFor is Issue for principal's subject and scopes, carrying its tier
// and provider (an outside identity's, after a token exchange); ttl, when
// positive and shorter than the issuer's, bounds the token's life.
func (i *Issuer) IssueFor(principal *Principal, ttl time.Duration) (token string, expiresAt time.Time, err error) {
	subject, scopes := principal.Subject, principal.Scopes
	switch {
	case i.Keys == nil:
		return "", time.Time{}, errors.New("auth: issuer has no keys")
	case i.Issuer == "" || i.Audience == "":
		return "", time.Time{}, errors.New("auth: issuer needs Issuer and Audience")
	case subject == "":
		return "", time.Time{}, ErrNoSubject
	}
	longest := i.TTL
	if longest <= 0 {
		longest = DefaultTTL
	}
	if ttl <= 0 || ttl > longest {
		ttl = longest
	}
	now := nowFunc(i.Now)().Truncate(time.Second)
	exp := now.Add(ttl).Truncate(time.Second)
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.Issuer,
			Subject:   subject,
			Audience:  jwt.ClaimStrings{i.Audience},
			ExpiresAt: jwt.NewNumericDate(exp),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        rand.Text(),
		},
		Scope:    strings.Join(scopes, " "),
		Tier:     principal.Tier,
		Provider: principal.Provider,
	}
	key := i.Keys.set.Load().active
	t := jwt.NewWithClaims(key.method(), c)
	t.Header["kid"] = key.kid
	s, err := t.SignedString(key.signKey)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("auth: sign token: %w", err)
	}
	return s, exp, nil
}

// Principal is the verified identity behind a token.
type Principal struct {
	Subject   string
	Scopes    []string
	ExpiresAt time.Time
	// KeyID is the id of the API key behind the request; empty for an
	// access token.
	KeyID string
	// IssuedAt and TokenID (the jti) identify an access token, for
	// revocation.
	IssuedAt time.Time
	TokenID  string
	// Tier names the limits tier that applies to the principal instead of
	// a local user's own limits ("" for none): set for users of an
	// identity provider, or of a client certificate, by their mapping.
	Tier string
	// Team is the team an API key was given (create-key --team); ""
	// for an access token, whose team is its user's, looked up at each
	// request.
	Team string
	// Provider is the issuer of an outside identity (an identity
	// provider's URL, "mtls" for a client certificate), "" for llmedge's
	// own users: such a subject is not looked up among the local users.
	Provider string
	// Priority is the class of work of an API key's requests (the key's
	// own, or else its user's), known when the key is verified. For an
	// access token it is the zero value: the gateway looks the user up
	// (Service.Priority).
	Priority api.Priority
}

// HasScope reports whether the principal was granted scope s.
func (p *Principal) HasScope(s string) bool {
	return p != nil && slices.Contains(p.Scopes, s)
}

// Verifier checks access tokens against a key ring.
type Verifier struct {
	Keys     *KeyRing
	Issuer   string // required iss
	Audience string // required aud
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	Now    func() time.Time // time.Now when nil
	// Cache, when set, remembers verified tokens until they expire.
	Cache *TokenCache
	// Refresh, when set, is called for a kid the ring does not know; if it
	// reports true the lookup is tried again. It lets an instance learn at
	// once of a key another instance just rotated in. It must rate-limit
	// itself: anyone can send an unknown kid.
	Refresh func() bool
	// Revoked, when set, is asked about every token that verifies, cached
	// ones included, so a revocation takes effect on the next request: a
	// true answer refuses the token (ErrRevoked). It runs on every
	// request: it must be cheap.
	Revoked func(p *Principal) bool
}

// Verify parses and checks token: EdDSA only, a kid naming a key of the
// ring, a valid signature, the configured iss and aud, exp present and not
// passed, nbf and iat not in the future (all within Leeway), and a
// subject; each member of the JSON type llmedge writes (a NumericDate is
// a number, never a string), no member twice, no crit header (see
// checkMembers). The token is to be trusted only when the error is nil. The
// Principal may be shared with other callers (see Cache): do not modify it.
func (v *Verifier) Verify(token string) (*Principal, error) {
	switch {
	case v.Keys == nil:
		return nil, errors.New("auth: verifier has no keys")
	case v.Issuer == "" || v.Audience == "":
		// An empty expectation would switch the check off in jwt.
		return nil, errors.New("auth: verifier needs Issuer and Audience")
	case len(token) > MaxTokenBytes:
		return nil, fmt.Errorf("%w: token longer than %d bytes", jwt.ErrTokenMalformed, MaxTokenBytes)
	}
	now := nowFunc(v.Now)()
	if p, err, ok := v.verifyCached(token, now); ok {
		return p, err
	}
	if !isCompactJWS(token) {
		// Go's base64 decoders skip \r and \n; refuse them (and anything
		// else outside base64url) so one token has one spelling.
		return nil, fmt.Errorf("%w: character outside base64url", jwt.ErrTokenMalformed)
	}
	if err := checkMembers(token); err != nil {
		return nil, err
	}
	p := jwt.NewParser(
		// Only the algorithms of the ring's keys; key() also checks that
		// the token's alg is its key's.
		jwt.WithValidMethods(v.Keys.set.Load().algs),
		jwt.WithIssuer(v.Issuer),
		jwt.WithAudience(v.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.Leeway),
		jwt.WithTimeFunc(nowFunc(v.Now)),
		// Canonical base64 only, so one token has one spelling.
		jwt.WithStrictDecoding(),
	)
	var c claims
	t, err := p.ParseWithClaims(token, &c, v.key)
	if err != nil {
		return nil, err
	}
	if !t.Valid {
		return nil, jwt.ErrTokenSignatureInvalid
	}
	if c.Subject == "" {
		return nil, ErrNoSubject
	}
	principal := &Principal{
		Subject:   c.Subject,
		Scopes:    strings.Fields(c.Scope),
		ExpiresAt: c.ExpiresAt.Time,
		TokenID:   c.ID,
		Tier:      c.Tier,
		Provider:  c.Provider,
	}
	if c.IssuedAt != nil {
		principal.IssuedAt = c.IssuedAt.Time
	}
	kid, _ := t.Header["kid"].(string)
	v.Cache.put(token, kid, principal, c.ExpiresAt.Time.Add(v.Leeway))
	if v.Revoked != nil && v.Revoked(principal) {
		return nil, ErrRevoked
	}
	return principal, nil
}

// key is the jwt.Keyfunc: the ring's verifying key named by the kid
// header, provided the token claims that key's algorithm (no algorithm
// confusion: an HS256 token cannot name an EdDSA key, and so on).
func (v *Verifier) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k, ok := v.Keys.lookup(kid)
	if !ok && v.Refresh != nil && v.Refresh() {
		k, ok = v.Keys.lookup(kid)
	}
	if !ok {
		return nil, ErrUnknownKey
	}
	if t.Method.Alg() != k.alg {
		return nil, fmt.Errorf("%w: token alg %s, key alg %s", ErrUnknownKey, t.Method.Alg(), k.alg)
	}
	return k.verKey, nil
}

// isCompactJWS reports whether s has only base64url characters and dots.
func isCompactJWS(s string) bool { return IsCompactJWS(s) }

// IsCompactJWS reports whether s has only base64url characters and dots,
// so that one token has one spelling (Go's base64 decoders skip \r and \n).
func IsCompactJWS(s string) bool {
	for i := 0; i < len(s); i++ {
		if !jwsChars[s[i]] {
			return false
		}
	}
	return true
}

var jwsChars = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	return t
}()

func nowFunc(f func() time.Time) func() time.Time {
	if f == nil {
		return time.Now
	}
	return f
}
