package identity

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/keep"
)

// Errors of Verify, to be told apart with errors.Is; Verify's errors may
// also wrap golang-jwt's (jwt.ErrTokenExpired, ...).
var (
	// ErrUntrusted: the token's iss is no trusted issuer.
	ErrUntrusted = errors.New("identity: token of an untrusted issuer")
	// ErrNoKeys: the issuer's keys have not been fetched yet.
	ErrNoKeys = errors.New("identity: the issuer's keys are not available")
	// ErrNoUser: the claims name no usable user.
	ErrNoUser = errors.New("identity: token names no user")
	// ErrTokenType: the typ header is not an access token's.
	ErrTokenType = errors.New("identity: token is not an access token")
	// ErrParty: the token was issued to a client the trust does not name.
	ErrParty = errors.New("identity: token issued to another client")
)

// DefaultClockSkew is the leeway on exp, nbf and iat when a trust sets
// none.
const DefaultClockSkew = 30 * time.Second

// Issuer is one trusted identity provider.
type Issuer struct {
	// Issuer is the provider's issuer URL, exactly as its tokens' iss
	// claim and its discovery document say it.
	Issuer string
	// Audience: a token's aud must hold one of these. Required.
	Audience []string
	// Algorithms allowed (DefaultAlgorithms when empty): asymmetric only.
	Algorithms []string
	// ClockSkew is the leeway on exp, nbf and iat (DefaultClockSkew when
	// 0; negative for none).
	ClockSkew time.Duration
	// TokenType "at+jwt" requires RFC 9068 access tokens (typ at+jwt);
	// otherwise a typ, when present, must be JWT or at+jwt.
	TokenType string
	// AuthorizedParties, when set, must hold the token's azp or client_id.
	AuthorizedParties []string
	// Mapping turns the claims into a user, scopes and a tier.
	Mapping Mapping
	// JWKSURI, when set, is used instead of discovery.
	JWKSURI string
	// Refresh and MinRefresh: see DefaultRefresh and DefaultMinRefresh.
	Refresh, MinRefresh time.Duration
	// CAFile, when set, verifies the provider's HTTPS with this CA
	// instead of the system's.
	CAFile string
}

// Config configures a Provider.
type Config struct {
	Issuers []Issuer
	// Models are every model served ("*" in a grant means all of them).
	Models []string
	// Tiers are the limits tiers defined, which rules may name.
	Tiers map[string]bool
	// LocalIssuer is llmedge's own iss: no trust may claim it.
	LocalIssuer string
	// Client fetches discovery documents and keys (a client with
	// FetchTimeout when nil).
	Client *http.Client
	// Kept shares each issuer's key cache with the other configurations
	// that trust it with the same settings (a private store when nil).
	Kept *keep.Store
	// Revoked, when set, is asked about every token that verifies, cached
	// ones included (`llmedge revoke --user`).
	Revoked func(p *auth.Principal) bool
	// Realm names the protected space in WWW-Authenticate challenges.
	Realm string
	// CacheSize bounds the verified tokens remembered (10000 when 0; none
	// when negative).
	CacheSize int
	Now       func() time.Time // time.Now when nil
	Logger    *zap.Logger
}

// trust is one issuer's verification, built from its Issuer.
type trust struct {
	cfg      Issuer
	src      *source
	key      string // of src in Kept
	parser   *jwt.Parser
	skew     time.Duration
	provider *Provider
}

// Provider verifies the access tokens of the trusted issuers. New takes
// the key caches, Start fetches what is not fetched yet, Stop lets go.
type Provider struct {
	cfg     Config
	byIss   map[string]*trust
	trusts  []*trust
	cache   *tokenCache
	logger  *zap.Logger
	stopped sync.Once
}

// New checks the configuration and takes each issuer's key cache (shared
// through Kept with the configurations that trust it alike). Nothing is
// fetched before Start.
func New(cfg Config) (*Provider, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Kept == nil {
		cfg.Kept = keep.New()
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: FetchTimeout}
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 10_000
	}
	p := &Provider{cfg: cfg, byIss: map[string]*trust{}, cache: newTokenCache(cfg.CacheSize), logger: cfg.Logger}
	for i := range cfg.Issuers {
		t, err := p.newTrust(cfg.Issuers[i])
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.byIss[t.cfg.Issuer] = t
		p.trusts = append(p.trusts, t)
	}
	return p, nil
}

// Validate checks one trust's settings as New does, for configuration
// adapters that want the error early.
func (ic *Issuer) Validate(cfg *Config) error {
	u, err := url.Parse(ic.Issuer)
	switch {
	case ic.Issuer == "":
		return errors.New("trust: want an issuer URL")
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("trust %s: the issuer must be an https URL", ic.Issuer)
	case u.Scheme == "http" && !IsLoopback(u.Hostname()):
		return fmt.Errorf("trust %s: an http issuer is only allowed on a loopback host; use https", ic.Issuer)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("trust %s: an issuer URL has no query or fragment", ic.Issuer)
	case cfg.LocalIssuer != "" && ic.Issuer == cfg.LocalIssuer:
		return fmt.Errorf("trust %s: that is llmedge's own issuer", ic.Issuer)
	case len(ic.Audience) == 0:
		return fmt.Errorf("trust %s: want an audience (the aud its tokens carry for llmedge)", ic.Issuer)
	case ic.TokenType != "" && ic.TokenType != "at+jwt":
		return fmt.Errorf("trust %s: token_type %q: want at+jwt", ic.Issuer, ic.TokenType)
	}
	for _, a := range ic.Algorithms {
		if !slices.Contains(SupportedAlgorithms, a) {
			return fmt.Errorf("trust %s: algorithm %q is not allowed (want some of %s; never none or an HMAC)",
				ic.Issuer, a, strings.Join(SupportedAlgorithms, " "))
		}
	}
	if ic.JWKSURI != "" {
		if err := checkURL(ic.JWKSURI, ic.Issuer); err != nil {
			return fmt.Errorf("trust %s: jwks_uri %w", ic.Issuer, err)
		}
	}
	if ic.MinRefresh < 0 || ic.Refresh < 0 || (ic.Refresh > 0 && ic.MinRefresh > ic.Refresh) {
		return fmt.Errorf("trust %s: want 0 < min_refresh <= refresh", ic.Issuer)
	}
	if err := ic.Mapping.Validate(cfg.Models, cfg.Tiers); err != nil {
		return fmt.Errorf("trust %s: %w", ic.Issuer, err)
	}
	return nil
}

func (p *Provider) newTrust(ic Issuer) (*trust, error) {
	if _, dup := p.byIss[ic.Issuer]; dup {
		return nil, fmt.Errorf("trust %s: given twice", ic.Issuer)
	}
	if err := ic.Validate(&p.cfg); err != nil {
		return nil, err
	}
	if len(ic.Algorithms) == 0 {
		ic.Algorithms = DefaultAlgorithms
	}
	if ic.Mapping.UserPrefix == "" {
		ic.Mapping.UserPrefix = DefaultUserPrefix(ic.Issuer)
	}
	if ic.Refresh == 0 {
		ic.Refresh = DefaultRefresh
	}
	if ic.MinRefresh == 0 {
		ic.MinRefresh = min(DefaultMinRefresh, ic.Refresh)
	}
	skew := ic.ClockSkew
	switch {
	case skew == 0:
		skew = DefaultClockSkew
	case skew < 0:
		skew = 0
	}
	t := &trust{cfg: ic, skew: skew, provider: p}
	t.parser = jwt.NewParser(
		jwt.WithValidMethods(ic.Algorithms),
		jwt.WithIssuer(ic.Issuer),
		jwt.WithAudience(ic.Audience...),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(skew),
		jwt.WithTimeFunc(p.now),
		jwt.WithStrictDecoding(),
	)
	client := p.cfg.Client
	if ic.CAFile != "" {
		var err error
		if client, err = clientWithCA(ic.CAFile); err != nil {
			return nil, fmt.Errorf("trust %s: %w", ic.Issuer, err)
		}
	}
	// The key cache depends only on where and what is fetched: two
	// configurations that differ in audience or mapping share it.
	h := sha256.Sum256([]byte(ic.Issuer + "\x00" + ic.JWKSURI + "\x00" + strings.Join(ic.Algorithms, " ") +
		"\x00" + ic.Refresh.String() + "\x00" + ic.MinRefresh.String() + "\x00" + ic.CAFile))
	t.key = "identity.keys." + hex.EncodeToString(h[:8])
	v, _, err := p.cfg.Kept.LoadOrNew(t.key, func() (any, error) {
		return newSource(sourceConfig{issuer: ic.Issuer, jwksURI: ic.JWKSURI, algs: ic.Algorithms,
			refresh: ic.Refresh, minimum: ic.MinRefresh, client: client, logger: p.logger}), nil
	})
	if err != nil {
		return nil, err
	}
	t.src = v.(*source)
	return t, nil
}

// Start fetches the keys of every issuer not fetched yet, waiting at most
// until ctx ends (a provider that is down does not hold the gateway's
// start: its loop keeps trying), and runs the refresh loops.
func (p *Provider) Start(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range p.trusts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.src.startOnce(ctx)
		}()
	}
	wg.Wait()
}

// Stop lets go of the key caches: the last configuration that uses one
// stops its loop and waits for it.
func (p *Provider) Stop() {
	p.stopped.Do(func() {
		for _, t := range p.trusts {
			_, _ = p.cfg.Kept.Delete(t.key)
		}
	})
}

// Status describes each issuer's keys, in configuration order.
func (p *Provider) Status() []SourceStatus {
	out := make([]SourceStatus, len(p.trusts))
	for i, t := range p.trusts {
		out[i] = t.src.status()
	}
	return out
}

// Issuers are the trusted issuers, in configuration order.
func (p *Provider) Issuers() []string {
	out := make([]string, len(p.trusts))
	for i, t := range p.trusts {
		out[i] = t.cfg.Issuer
	}
	return out
}

// Namespaces are the names each trusted issuer's users take (package
// auth: no local user, no other source, may take one).
func (p *Provider) Namespaces() []auth.Namespace {
	out := make([]auth.Namespace, len(p.trusts))
	for i, t := range p.trusts {
		out[i] = auth.Namespace{Source: t.cfg.Issuer, Prefix: t.cfg.Mapping.UserPrefix}
	}
	return out
}

// DefaultUserPrefix is the namespace of a source without user_prefix: its
// name (the issuer URL, which has no fragment) and '#', which no other
// issuer's can start and which is plain to read in the status page and
// the ledger.
func DefaultUserPrefix(source string) string { return source + "#" }

// Trusts reports whether iss is a trusted issuer.
func (p *Provider) Trusts(iss string) bool {
	_, ok := p.byIss[iss]
	return ok
}

func (p *Provider) now() time.Time {
	if p.cfg.Now != nil {
		return p.cfg.Now()
	}
	return time.Now()
}

// Verify checks an access token of a trusted issuer and maps its claims:
// the issuer's key named by kid (fetched again, rate-limited, when the
// kid is unknown), an allowed algorithm that fits the key, iss exactly,
// aud holding a configured audience, exp present and nbf and iat passed
// (within the skew), an access token's typ, the authorized party when
// configured, and a user. The principal is to be trusted only when the
// error is nil, and is shared (see the cache): do not modify it.
func (p *Provider) Verify(token string) (*auth.Principal, error) {
	return p.verify(token)
}

func (p *Provider) verify(token string) (*auth.Principal, error) {
	// The cache holds verified tokens only: a hit needs no other check.
	if e, ok := p.cache.get(token, p.now()); ok && e.valid() {
		if p.cfg.Revoked != nil && p.cfg.Revoked(e.principal) {
			return nil, auth.ErrRevoked
		}
		return e.principal, nil
	}
	if len(token) > auth.MaxTokenBytes {
		return nil, fmt.Errorf("%w: token longer than %d bytes", jwt.ErrTokenMalformed, auth.MaxTokenBytes)
	}
	if !auth.IsCompactJWS(token) {
		return nil, fmt.Errorf("%w: character outside base64url", jwt.ErrTokenMalformed)
	}
	iss, ok := auth.PeekIssuer(token)
	if !ok {
		return nil, fmt.Errorf("%w: no iss claim", jwt.ErrTokenMalformed)
	}
	t := p.byIss[iss]
	if t == nil {
		return nil, ErrUntrusted
	}
	return t.verify(token)
}

func (t *trust) verify(token string) (*auth.Principal, error) {
	var claims jwt.MapClaims
	var k *key
	set := t.src.set.Load()
	tok, err := t.parser.ParseWithClaims(token, &claims, func(tok *jwt.Token) (any, error) {
		var err error
		k, err = t.keyFor(tok)
		if err != nil {
			return nil, err
		}
		return k.pub, nil
	})
	if err != nil {
		return nil, err
	}
	if !tok.Valid {
		return nil, jwt.ErrTokenSignatureInvalid
	}
	if _, crit := tok.Header["crit"]; crit {
		// RFC 7515 §4.1.11: extensions we do not understand.
		return nil, fmt.Errorf("%w: crit header", jwt.ErrTokenUnverifiable)
	}
	if err := t.checkType(tok.Header["typ"]); err != nil {
		return nil, err
	}
	c := Claims(claims)
	if len(t.cfg.AuthorizedParties) > 0 {
		party := c.String("azp")
		if party == "" {
			party = c.String("client_id")
		}
		if !slices.Contains(t.cfg.AuthorizedParties, party) {
			return nil, ErrParty
		}
	}
	user, err := t.cfg.Mapping.User(c)
	if err != nil {
		return nil, err
	}
	exp, _ := claims.GetExpirationTime() // required by the parser
	principal := &auth.Principal{
		Subject:   user,
		Scopes:    t.cfg.Mapping.Scopes(c, t.provider.cfg.Models),
		ExpiresAt: exp.Time,
		TokenID:   c.String("jti"),
		Tier:      t.cfg.Mapping.Tier(c),
		Provider:  t.cfg.Issuer,
	}
	if iat, _ := claims.GetIssuedAt(); iat != nil {
		principal.IssuedAt = iat.Time
	}
	t.provider.cache.put(token, cacheEntry{principal: principal, trust: t, kid: k.kid, set: set, expires: exp.Time.Add(t.skew)})
	if rv := t.provider.cfg.Revoked; rv != nil && rv(principal) {
		return nil, auth.ErrRevoked
	}
	return principal, nil
}

// keyFor is the issuer's key for tok: the one its kid names (the keys are
// fetched again, at most once per minimum interval, when the kid is
// unknown), or, without a kid, the only key for its algorithm. The
// token's alg must be one the key may verify: an HS256 token can never
// name an RSA key, an ES256 token an Ed25519 one, and so on.
func (t *trust) keyFor(tok *jwt.Token) (*key, error) {
	alg := tok.Method.Alg()
	set := t.src.set.Load()
	kid, hasKID := tok.Header["kid"].(string)
	var k *key
	var ok bool
	if hasKID {
		if k, ok = set.lookup(kid); !ok && t.src.refreshUnknown() {
			k, ok = t.src.set.Load().lookup(kid)
		}
	} else {
		k, ok = set.forAlg(alg)
	}
	if !ok {
		if t.src.set.Load() == nil {
			return nil, ErrNoKeys
		}
		return nil, auth.ErrUnknownKey
	}
	if !slices.Contains(k.algs, alg) {
		return nil, fmt.Errorf("%w: token alg %s does not fit the key", auth.ErrUnknownKey, alg)
	}
	return k, nil
}

func (t *trust) checkType(v any) error {
	typ, present := v.(string)
	if v != nil && !present {
		return ErrTokenType
	}
	typ = strings.ToLower(strings.TrimPrefix(strings.ToLower(typ), "application/"))
	switch {
	case t.cfg.TokenType == "at+jwt":
		if typ != "at+jwt" {
			return ErrTokenType
		}
	case v == nil, typ == "jwt", typ == "at+jwt":
	default:
		return ErrTokenType
	}
	return nil
}

// Authenticate implements auth.Authenticator: a Bearer JWT whose iss is a
// trusted issuer is verified (a principal, or 401 invalid_token); any
// other request gets auth.NotAuthenticated, so the next authenticator is
// asked.
func (p *Provider) Authenticate(r *http.Request) (*auth.Principal, *api.Error) {
	token, apiErr := auth.BearerToken(r, p.cfg.Realm)
	if apiErr != nil {
		if auth.IsNotAuthenticated(apiErr) {
			return nil, apiErr
		}
		// A malformed header: another authenticator may know better
		// (bearer answers it the same way).
		return nil, auth.NotAuthenticated(p.cfg.Realm)
	}
	if !p.Claims(token) {
		return nil, auth.NotAuthenticated(p.cfg.Realm)
	}
	principal, err := p.verify(token)
	if err != nil {
		return nil, auth.InvalidToken(p.cfg.Realm, Describe(err))
	}
	return principal, nil
}

// Claims reports whether token is for this provider to verify: a token
// it verified before, or a JWT whose (unverified) iss is a trusted
// issuer. Bearer asks it (auth.BearerAuth.Foreign) to pass such tokens on.
func (p *Provider) Claims(token string) bool {
	if _, ok := p.cache.get(token, p.now()); ok {
		return true
	}
	iss, ok := auth.PeekIssuer(token)
	return ok && p.Trusts(iss)
}

// VerifySubjectToken implements auth.SubjectTokenVerifier, for the token
// exchange grant: whether it knows the token (its iss is trusted), and if
// so the principal or why not.
func (p *Provider) VerifySubjectToken(token string) (bool, *auth.Principal, string) {
	iss, ok := auth.PeekIssuer(token)
	if !ok || !p.Trusts(iss) {
		return false, nil, ""
	}
	principal, err := p.Verify(token)
	if err != nil {
		return true, nil, Describe(err)
	}
	return true, principal, ""
}

// Describe maps a Verify error to a fixed text for error_description:
// nothing of the token is echoed.
func Describe(err error) string {
	switch {
	case errors.Is(err, ErrNoKeys):
		return "the issuer's keys are not available yet"
	case errors.Is(err, ErrNoUser):
		return "the access token names no user"
	case errors.Is(err, ErrTokenType):
		return "the token is not an access token"
	case errors.Is(err, ErrParty):
		return "the access token was issued to another client"
	}
	return auth.DescribeTokenError(err)
}

var (
	_ auth.Authenticator        = (*Provider)(nil)
	_ auth.SubjectTokenVerifier = (*Provider)(nil)
)

// clientWithCA is a client that trusts the CA in the PEM file at path.
func clientWithCA(path string) (*http.Client, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %s holds no PEM certificate", path)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: FetchTimeout, Transport: tr}, nil
}
