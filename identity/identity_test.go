package identity

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/keep"
)

// testIdP is an OpenID provider in miniature: discovery, a JWKS of the
// keys it publishes, and request counts.
type testIdP struct {
	srv       *httptest.Server
	mu        sync.Mutex
	keys      []testKey // published
	down      bool
	maxAge    string
	discovery atomic.Int64
	jwks      atomic.Int64
	issuer    string // as discovery names it (the URL by default)
}

type testKey struct {
	kid    string
	alg    string
	signer crypto.Signer
}

func newTestKey(t testing.TB, alg string) testKey {
	t.Helper()
	var s crypto.Signer
	var err error
	switch alg {
	case "RS256", "PS256":
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, s, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid: rand.Text()[:10], alg: alg, signer: s}
}

func newTestIdP(t testing.TB, keys ...testKey) *testIdP {
	p := &testIdP{keys: keys}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.issuer = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

func (p *testIdP) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		p.discovery.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": p.issuer, "jwks_uri": p.srv.URL + "/jwks"})
	case "/jwks":
		p.jwks.Add(1)
		if p.maxAge != "" {
			w.Header().Set("Cache-Control", "max-age="+p.maxAge)
		}
		var set jose.JSONWebKeySet
		for _, k := range p.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.signer.Public(), KeyID: k.kid, Algorithm: k.alg, Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

func (p *testIdP) setKeys(keys ...testKey) { p.mu.Lock(); p.keys = keys; p.mu.Unlock() }
func (p *testIdP) setDown(down bool)       { p.mu.Lock(); p.down = down; p.mu.Unlock() }

// sign makes a token with k; edit may change the header and claims.
func sign(t testing.TB, k testKey, claims jwt.MapClaims, edit func(h map[string]any)) string {
	t.Helper()
	m := jwt.GetSigningMethod(k.alg)
	tok := jwt.NewWithClaims(m, claims)
	tok.Header["kid"] = k.kid
	if edit != nil {
		edit(tok.Header)
	}
	var key any = k.signer
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claimsFor(iss string, extra jwt.MapClaims) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": iss, "sub": "u-123", "aud": []string{"llmedge"}, "exp": now.Add(time.Hour).Unix(),
		"iat": now.Unix(), "nbf": now.Unix(), "jti": "j1", "preferred_username": "alice",
		"groups": []string{"ml-team"}, "realm_access": map[string]any{"roles": []string{"llm-user"}},
		"scope": "openid model-admin"}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func newProvider(t testing.TB, idp *testIdP, edit func(*Issuer)) *Provider {
	t.Helper()
	ic := Issuer{Issuer: idp.srv.URL, Audience: []string{"llmedge"},
		Mapping:    Mapping{UserClaim: "preferred_username", UserPrefix: "idp:", Grants: []Rule{{Claim: "groups", Value: "ml-team", Models: []string{"qwen"}}}},
		MinRefresh: 50 * time.Millisecond, Refresh: time.Hour}
	if edit != nil {
		edit(&ic)
	}
	p, err := New(Config{Issuers: []Issuer{ic}, Models: []string{"qwen", "gemma"}, Tiers: map[string]bool{"gold": true}, Realm: "llmedge", Kept: keep.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Start(ctx)
	t.Cleanup(p.Stop)
	return p
}

func TestVerifyAndMap(t *testing.T) {
	k := newTestKey(t, "RS256")
	idp := newTestIdP(t, k)
	p := newProvider(t, idp, nil)
	tok := sign(t, k, claimsFor(idp.srv.URL, nil), nil)
	pr, err := p.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Subject != "idp:alice" || !pr.HasScope("model:qwen") || pr.HasScope("model:gemma") || pr.Provider != idp.srv.URL || pr.TokenID != "j1" {
		t.Fatalf("principal %+v", pr)
	}
	// Again: from the cache, the same principal.
	if pr2, err := p.Verify(tok); err != nil || pr2 != pr {
		t.Fatalf("cached: %v %p %p", err, pr2, pr)
	}
}

func TestForgedTokensRefused(t *testing.T) {
	rsaKey := newTestKey(t, "RS256")
	ecKey := newTestKey(t, "ES256")
	idp := newTestIdP(t, rsaKey, ecKey)
	p := newProvider(t, idp, nil)
	other := newTestKey(t, "RS256")
	iss := idp.srv.URL
	pubDER, _ := x509.MarshalPKIXPublicKey(rsaKey.signer.Public())

	hs256WithPublicKey := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsFor(iss, nil))
		tok.Header["kid"] = rsaKey.kid
		s, _ := tok.SignedString(pubDER)
		return s
	}()
	none := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, claimsFor(iss, nil))
		tok.Header["kid"] = rsaKey.kid
		s, _ := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		return s
	}()
	// An RS256 token naming the EC key: the alg does not fit the key.
	rsNamingEC := sign(t, rsaKey, claimsFor(iss, nil), func(h map[string]any) { h["kid"] = ecKey.kid })
	for _, tc := range []struct {
		name, token string
		want        error
	}{
		{"alg none", none, jwt.ErrTokenSignatureInvalid},
		{"HS256 signed with the public key", hs256WithPublicKey, jwt.ErrTokenSignatureInvalid},
		{"signed by another key under a known kid", sign(t, other, claimsFor(iss, nil), func(h map[string]any) { h["kid"] = rsaKey.kid }), jwt.ErrTokenSignatureInvalid},
		{"alg that does not fit the key", rsNamingEC, auth.ErrUnknownKey},
		{"another issuer", sign(t, rsaKey, claimsFor("https://evil.example", nil), nil), ErrUntrusted},
		{"wrong audience", sign(t, rsaKey, claimsFor(iss, jwt.MapClaims{"aud": "other"}), nil), jwt.ErrTokenInvalidAudience},
		{"no audience", sign(t, rsaKey, claimsFor(iss, jwt.MapClaims{"aud": nil}), nil), jwt.ErrTokenRequiredClaimMissing},
		{"expired", sign(t, rsaKey, claimsFor(iss, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}), nil), jwt.ErrTokenExpired},
		{"no exp", sign(t, rsaKey, claimsFor(iss, jwt.MapClaims{"exp": nil}), nil), jwt.ErrTokenRequiredClaimMissing},
		{"not yet valid", sign(t, rsaKey, claimsFor(iss, jwt.MapClaims{"nbf": time.Now().Add(time.Hour).Unix()}), nil), jwt.ErrTokenNotValidYet},
		{"unknown kid", sign(t, other, claimsFor(iss, nil), nil), auth.ErrUnknownKey},
		{"an ID token's typ is fine but a logout token's is not", sign(t, rsaKey, claimsFor(iss, nil), func(h map[string]any) { h["typ"] = "logout+jwt" }), ErrTokenType},
		{"crit header", sign(t, rsaKey, claimsFor(iss, nil), func(h map[string]any) { h["crit"] = []string{"exp"} }), jwt.ErrTokenUnverifiable},
		{"no user claim", sign(t, rsaKey, claimsFor(iss, jwt.MapClaims{"preferred_username": nil}), nil), ErrNoUser},
		{"user claim with control characters", sign(t, rsaKey, claimsFor(iss, jwt.MapClaims{"preferred_username": "a\nb"}), nil), ErrNoUser},
		{"malformed", "eyJ.a.b", jwt.ErrTokenMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Verify(tc.token)
			if err == nil || !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			if d := Describe(err); strings.Contains(d, tc.token) || d == "" {
				t.Fatalf("description %q", d)
			}
		})
	}
}

func TestTypeAndParty(t *testing.T) {
	k := newTestKey(t, "ES256")
	idp := newTestIdP(t, k)
	p := newProvider(t, idp, func(ic *Issuer) {
		ic.TokenType = "at+jwt"
		ic.AuthorizedParties = []string{"cli"}
	})
	iss := idp.srv.URL
	at := func(h map[string]any) { h["typ"] = "at+jwt" }
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"at+jwt from cli", sign(t, k, claimsFor(iss, jwt.MapClaims{"azp": "cli"}), at), nil},
		{"client_id claim", sign(t, k, claimsFor(iss, jwt.MapClaims{"client_id": "cli"}), at), nil},
		{"typ JWT refused when at+jwt is required", sign(t, k, claimsFor(iss, jwt.MapClaims{"azp": "cli"}), nil), ErrTokenType},
		{"another client", sign(t, k, claimsFor(iss, jwt.MapClaims{"azp": "web"}), at), ErrParty},
		{"no client", sign(t, k, claimsFor(iss, nil), at), ErrParty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Verify(tc.token)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestClaimMapping(t *testing.T) {
	claims := Claims{
		"sub": "u-1", "email": "a@x.org", "preferred_username": "alice",
		"groups":                    []any{"ml-team", "ops"},
		"roles":                     []any{"Reader"},
		"scope":                     "openid llm.qwen profile",
		"scp":                       []any{"llm.gemma"},
		"realm_access":              map[string]any{"roles": []any{"llm-admin"}},
		"resource_access":           map[string]any{"llmedge": map[string]any{"roles": []any{"gold"}}},
		"https://example.com/teams": []any{"research"},
	}
	all := []string{"qwen", "gemma", "llama"}
	for _, tc := range []struct {
		name   string
		m      Mapping
		user   string
		scopes string
		tier   string
	}{
		{"defaults: sub, nothing granted", Mapping{}, "u-1", "", ""},
		{"email and a group (Okta)", Mapping{UserClaim: "email", Grants: []Rule{{Claim: "groups", Value: "ml-team", Models: []string{"qwen", "gemma"}}}},
			"a@x.org", "model:gemma model:qwen", ""},
		{"Keycloak realm role grants all", Mapping{UserClaim: "preferred_username", UserPrefix: "kc:",
			Grants: []Rule{{Claim: "realm_access.roles", Value: "llm-admin", Models: []string{"*"}}}},
			"kc:alice", "model:gemma model:llama model:qwen", ""},
		{"Keycloak client role picks a tier", Mapping{Tiers: []Rule{{Claim: "resource_access.llmedge.roles", Value: "gold", Tier: "gold"}}, DefaultTier: "free"},
			"u-1", "", "gold"},
		{"default tier", Mapping{Tiers: []Rule{{Claim: "groups", Value: "nobody", Tier: "gold"}}, DefaultTier: "free"}, "u-1", "", "free"},
		{"first tier rule wins", Mapping{Tiers: []Rule{{Claim: "groups", Value: "ops", Tier: "ops"}, {Claim: "groups", Value: "ml-team", Tier: "ml"}}}, "u-1", "", "ops"},
		{"Entra roles, scope string and scp array", Mapping{Grants: []Rule{
			{Claim: "roles", Value: "Reader", Models: []string{"llama"}},
			{Claim: "scope", Value: "llm.qwen", Models: []string{"qwen"}},
			{Claim: "scp", Value: "llm.gemma", Models: []string{"gemma"}},
			{Claim: "scope", Value: "llm", Models: []string{"*"}}, // a word, not a prefix
		}}, "u-1", "model:gemma model:llama model:qwen", ""},
		{"a claim name with dots", Mapping{Grants: []Rule{{Claim: "https://example.com/teams", Value: "research", Models: []string{"gemma"}}}}, "u-1", "model:gemma", ""},
		{"any value", Mapping{Grants: []Rule{{Claim: "groups", Value: "*", Models: []string{"qwen"}}, {Claim: "missing", Value: "*", Models: []string{"gemma"}}}}, "u-1", "model:qwen", ""},
		{"models for everyone", Mapping{Models: []string{"llama"}}, "u-1", "model:llama", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := tc.m.User(claims)
			if err != nil || user != tc.user {
				t.Fatalf("user %q %v, want %q", user, err, tc.user)
			}
			if got := strings.Join(tc.m.Scopes(claims, all), " "); got != tc.scopes {
				t.Fatalf("scopes %q, want %q", got, tc.scopes)
			}
			if got := tc.m.Tier(claims); got != tc.tier {
				t.Fatalf("tier %q, want %q", got, tc.tier)
			}
		})
	}
}

func TestMappingValidate(t *testing.T) {
	models, tiers := []string{"qwen"}, map[string]bool{"gold": true}
	for _, tc := range []struct {
		m    Mapping
		want string
	}{
		{Mapping{Grants: []Rule{{Claim: "groups", Value: "x", Models: []string{"gpt"}}}}, `model "gpt" is not a configured model`},
		{Mapping{Tiers: []Rule{{Claim: "groups", Value: "x", Tier: "silver"}}}, `tier "silver" is not defined`},
		{Mapping{DefaultTier: "silver"}, `tier "silver" is not defined`},
		{Mapping{Grants: []Rule{{Claim: "groups", Value: "x", Models: []string{"*"}}}, Tiers: []Rule{{Claim: "g", Value: "y", Tier: "gold"}}}, ""},
	} {
		err := tc.m.Validate(models, tiers)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate: %v, want %q", err, tc.want)
		}
	}
}

func TestIssuerValidate(t *testing.T) {
	cfg := &Config{LocalIssuer: "llmedge"}
	for _, tc := range []struct {
		ic   Issuer
		want string
	}{
		{Issuer{Issuer: "http://idp.example.com", Audience: []string{"a"}}, "only allowed on a loopback host"},
		{Issuer{Issuer: "https://idp.example.com"}, "want an audience"},
		{Issuer{Issuer: "https://idp.example.com", Audience: []string{"a"}, Algorithms: []string{"HS256"}}, "never none or an HMAC"},
		{Issuer{Issuer: "https://idp.example.com", Audience: []string{"a"}, Algorithms: []string{"none"}}, "never none or an HMAC"},
		{Issuer{Issuer: "llmedge", Audience: []string{"a"}}, "https URL"},
		{Issuer{Issuer: "https://idp.example.com", Audience: []string{"a"}, TokenType: "JWT"}, "want at+jwt"},
		{Issuer{Issuer: "https://idp.example.com", Audience: []string{"a"}, JWKSURI: "http://idp.example.com/keys"}, "want https"},
		{Issuer{Issuer: "https://idp.example.com/realms/x", Audience: []string{"a"}, Algorithms: []string{"ES256"}}, ""},
		{Issuer{Issuer: "http://127.0.0.1:8080", Audience: []string{"a"}}, ""},
	} {
		err := tc.ic.Validate(cfg)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.ic.Issuer, err, tc.want)
		}
	}
}

func TestDiscoveryIssuerMustMatch(t *testing.T) {
	k := newTestKey(t, "RS256")
	idp := newTestIdP(t, k)
	idp.issuer = idp.srv.URL + "/" // one slash more is another issuer
	p := newProvider(t, idp, nil)
	st := p.Status()[0]
	if st.Keys != 0 || !strings.Contains(st.Error, "names issuer") {
		t.Fatalf("status %+v", st)
	}
	if _, err := p.Verify(sign(t, k, claimsFor(idp.srv.URL, nil), nil)); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("Verify: %v, want ErrNoKeys", err)
	}
}

func TestRotationRemovalAndOutage(t *testing.T) {
	k1 := newTestKey(t, "RS256")
	idp := newTestIdP(t, k1)
	p := newProvider(t, idp, nil)
	iss := idp.srv.URL
	old := sign(t, k1, claimsFor(iss, nil), nil)
	if _, err := p.Verify(old); err != nil {
		t.Fatal(err)
	}
	// Rotation: a token of the new key makes the cache fetch again.
	k2 := newTestKey(t, "ES256")
	idp.setKeys(k1, k2)
	time.Sleep(60 * time.Millisecond) // past the minimum interval
	if _, err := p.Verify(sign(t, k2, claimsFor(iss, nil), nil)); err != nil {
		t.Fatalf("new key: %v", err)
	}
	// The provider goes down: the keys in hand keep working.
	idp.setDown(true)
	time.Sleep(60 * time.Millisecond)
	p.trusts[0].src.fetch(false)
	st := p.Status()[0]
	if !st.Stale || st.Keys != 2 || st.Error == "" {
		t.Fatalf("status while down: %+v", st)
	}
	if _, err := p.Verify(sign(t, k1, claimsFor(iss, jwt.MapClaims{"jti": "j2"}), nil)); err != nil {
		t.Fatalf("cached key while down: %v", err)
	}
	// Back up without k1: its tokens, cached ones too, are refused after
	// the next refresh.
	idp.setDown(false)
	idp.setKeys(k2)
	p.trusts[0].src.fetch(false)
	if st := p.Status()[0]; st.Stale || st.Keys != 1 {
		t.Fatalf("status after recovery: %+v", st)
	}
	if _, err := p.Verify(old); !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("removed key: %v", err)
	}
}

func TestUnknownKIDFloodIsBounded(t *testing.T) {
	k := newTestKey(t, "RS256")
	idp := newTestIdP(t, k)
	p := newProvider(t, idp, func(ic *Issuer) { ic.MinRefresh = time.Hour })
	before := idp.jwks.Load() + idp.discovery.Load()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				forged := newTestKey(t, "EdDSA")
				forged.kid = "forged-" + string(rune('a'+i)) + string(rune('a'+j%26))
				if _, err := p.Verify(sign(t, forged, claimsFor(idp.srv.URL, nil), nil)); err == nil {
					t.Error("a forged kid verified")
				}
			}
		}()
	}
	wg.Wait()
	// The start's fetch was under an hour ago: no fetch at all.
	if n := idp.jwks.Load() + idp.discovery.Load() - before; n != 0 {
		t.Fatalf("%d requests to the provider for 400 unknown kids", n)
	}
}

func TestCacheControlMaxAge(t *testing.T) {
	s := &source{cfg: sourceConfig{refresh: 10 * time.Minute, minimum: 30 * time.Second}}
	for _, tc := range []struct {
		cc   string
		want time.Duration
	}{
		{"", 10 * time.Minute},
		{"public, max-age=120", 2 * time.Minute},
		{"max-age=5", 30 * time.Second},
		{"max-age=86400", 10 * time.Minute},
		{"no-store", 30 * time.Second},
		{"max-age=abc", 10 * time.Minute},
	} {
		d, ok := parseMaxAge(tc.cc)
		if got := s.nextFrom(d, ok); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.cc, got, tc.want)
		}
	}
}

func TestKeyCacheSharedAndStopped(t *testing.T) {
	k := newTestKey(t, "RS256")
	idp := newTestIdP(t, k)
	kept := keep.New()
	mk := func(aud string) *Provider {
		p, err := New(Config{Kept: kept, Models: []string{"qwen"}, Issuers: []Issuer{{Issuer: idp.srv.URL, Audience: []string{aud}}}})
		if err != nil {
			t.Fatal(err)
		}
		p.Start(context.Background())
		return p
	}
	a := mk("a")
	b := mk("b") // a reload: another audience, the same keys
	if a.trusts[0].src != b.trusts[0].src || idp.jwks.Load() != 1 {
		t.Fatalf("not shared: %d fetches", idp.jwks.Load())
	}
	a.Stop()
	if len(kept.Keys()) != 1 {
		t.Fatal("the cache went with the first configuration")
	}
	b.Stop()
	if len(kept.Keys()) != 0 {
		t.Fatalf("left: %v", kept.Keys())
	}
}

func TestParseJWKSSkipsUnusableKeys(t *testing.T) {
	rsaKey := newTestKey(t, "RS256")
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	priv := newTestKey(t, "ES256")
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: rsaKey.signer.Public(), KeyID: "good", Use: "sig"},
		{Key: small.Public(), KeyID: "small"},
		{Key: rsaKey.signer.Public(), KeyID: "enc", Use: "enc"},
		{Key: []byte("secret-secret-secret"), KeyID: "oct", Algorithm: "HS256"},
		{Key: priv.signer, KeyID: "private"},
		{Key: rsaKey.signer.Public(), KeyID: "mismatch", Algorithm: "ES256"},
	}}
	b, _ := json.Marshal(set)
	ks, skipped, err := parseJWKS(b, DefaultAlgorithms)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.keys) != 1 || ks.keys[0].kid != "good" || skipped != 5 {
		t.Fatalf("kept %d keys, skipped %d", len(ks.keys), skipped)
	}
	if k, _ := ks.lookup("good"); strings.Join(k.algs, " ") != "RS256 PS256" {
		t.Fatalf("algs %v", k.algs)
	}
	if _, _, err := parseJWKS([]byte(`{"keys":[]}`), DefaultAlgorithms); err == nil {
		t.Fatal("an empty set is an error (the last good one is kept)")
	}
}

// BenchmarkVerify measures an identity provider's token once its key is
// cached, beside auth's BenchmarkVerify (llmedge's own EdDSA tokens):
// "signature" checks the signature and decodes the claims every time,
// "cached" is a token seen before.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		k := newTestKey(b, alg)
		idp := newTestIdP(b, k)
		for _, tc := range []struct {
			name  string
			cache int
		}{{"signature", -1}, {"cached", 0}} {
			p, err := New(Config{Issuers: []Issuer{{Issuer: idp.srv.URL, Audience: []string{"llmedge"},
				Mapping: Mapping{UserClaim: "preferred_username", Grants: []Rule{{Claim: "groups", Value: "ml-team", Models: []string{"qwen"}}}}}},
				Models: []string{"qwen"}, CacheSize: tc.cache})
			if err != nil {
				b.Fatal(err)
			}
			p.Start(context.Background())
			tok := sign(b, k, claimsFor(idp.srv.URL, nil), nil)
			b.Run(alg+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Verify(tok); err != nil {
						b.Fatal(err)
					}
				}
			})
			p.Stop()
		}
	}
}

// BenchmarkChain measures the request's whole credential check, as the
// pipeline runs it: llmedge's token through bearer alone, and an identity
// provider's token through bearer (which passes it on) then the oidc
// authenticator; both seen before (their keys and the token cached).
func BenchmarkChain(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	v := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge", Cache: auth.NewTokenCache(1000)}
	local, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge"}).Issue("alice", []string{"model:qwen"})
	if err != nil {
		b.Fatal(err)
	}
	k := newTestKey(b, "RS256")
	idp := newTestIdP(b, k)
	p, err := New(Config{Issuers: []Issuer{{Issuer: idp.srv.URL, Audience: []string{"llmedge"},
		Mapping: Mapping{Grants: []Rule{{Claim: "groups", Value: "ml-team", Models: []string{"qwen"}}}}}}, Models: []string{"qwen"}})
	if err != nil {
		b.Fatal(err)
	}
	p.Start(context.Background())
	defer p.Stop()
	foreign := sign(b, k, claimsFor(idp.srv.URL, nil), nil)
	for _, tc := range []struct {
		name  string
		authn auth.Authenticator
		token string
	}{
		{"llmedge_token", &auth.BearerAuth{Verifier: v, Realm: "llmedge"}, local},
		{"llmedge_token_trusting_an_idp", auth.Chain{&auth.BearerAuth{Verifier: v, Realm: "llmedge", Foreign: p.Claims}, p}, local},
		{"idp_token", auth.Chain{&auth.BearerAuth{Verifier: v, Realm: "llmedge", Foreign: p.Claims}, p}, foreign},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		if _, err := tc.authn.Authenticate(r); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.authn.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
