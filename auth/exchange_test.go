package auth

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// fakeIdP knows the subject tokens that start with "idp-".
type fakeIdP struct{ principal *Principal }

func (f *fakeIdP) VerifySubjectToken(token string) (bool, *Principal, string) {
	switch {
	case !strings.HasPrefix(token, "idp-"):
		return false, nil, ""
	case token == "idp-expired":
		return true, nil, "the access token expired"
	}
	return true, f.principal, ""
}

func xForm(token string, extra ...string) url.Values {
	f := url.Values{"grant_type": {GrantTypeTokenExchange}, "subject_token": {token}, "subject_token_type": {TokenTypeAccessToken}}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Add(extra[i], extra[i+1])
	}
	return f
}

func TestTokenExchange(t *testing.T) {
	c := newClock()
	ep, _ := refreshEndpoint(t, c)
	idp := &fakeIdP{principal: &Principal{Subject: "kc:bob", Scopes: []string{"model:gemma", "model:qwen"}, Tier: "gold",
		Provider: "https://idp.example", ExpiresAt: testNow.Add(30 * time.Minute)}}

	if a := postToken(t, ep, xForm("idp-ok")); a.status != 400 || a.err.Error != "unsupported_grant_type" {
		t.Fatalf("exchange off: %d %s", a.status, a.body)
	}
	ep.Exchange = []SubjectTokenVerifier{idp}

	a := postToken(t, ep, xForm("idp-ok", "scope", "model:qwen", "audience", testAud))
	if a.status != 200 || a.resp.IssuedTokenType != TokenTypeAccessToken || a.resp.Scope != "model:qwen" ||
		a.resp.RefreshToken == "" || a.resp.ExpiresIn != 1800 {
		t.Fatalf("exchange: %d %s", a.status, a.body)
	}
	p, err := testVerifier(ep.Issuer.Keys).Verify(a.resp.AccessToken)
	if err != nil || p.Subject != "kc:bob" || p.Tier != "gold" || p.Provider != "https://idp.example" || !p.HasScope("model:qwen") || p.HasScope("model:gemma") {
		t.Fatalf("issued token: %+v %v", p, err)
	}
	// Its refresh token works without a local user, keeps tier and scope.
	r := postToken(t, ep, refreshForm(a.resp.RefreshToken, ""))
	if r.status != 200 || r.resp.Scope != "model:qwen" {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	if p, err := testVerifier(ep.Issuer.Keys).Verify(r.resp.AccessToken); err != nil || p.Tier != "gold" || p.Provider == "" {
		t.Fatalf("refreshed token: %+v %v", p, err)
	}
	// The exchanged login's refresh tokens end after DefaultExchangeRefreshTTL.
	c.Advance(DefaultExchangeRefreshTTL + time.Minute)
	if r2 := postToken(t, ep, refreshForm(r.resp.RefreshToken, "")); r2.status != 400 || r2.err.ErrorDescription != DetailRefreshExpired {
		t.Fatalf("refresh after the exchange TTL: %d %s", r2.status, r2.body)
	}

	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"untrusted issuer", xForm("eyJhbGc.x.y"), 400, "invalid_grant"},
		{"refused token", xForm("idp-expired"), 400, "invalid_grant"},
		{"scope beyond the identity's", xForm("idp-ok", "scope", "model:llama"), 400, "invalid_scope"},
		{"another audience", xForm("idp-ok", "audience", "https://other"), 400, "invalid_target"},
		{"a resource", xForm("idp-ok", "resource", "https://gw.example/v1"), 400, "invalid_target"},
		{"no subject_token", url.Values{"grant_type": {GrantTypeTokenExchange}, "subject_token_type": {TokenTypeJWT}}, 400, "invalid_request"},
		{"no subject_token_type", url.Values{"grant_type": {GrantTypeTokenExchange}, "subject_token": {"idp-ok"}}, 400, "invalid_request"},
		{"a SAML subject token", xForm("idp-ok", "subject_token_type", "urn:ietf:params:oauth:token-type:saml2"), 400, "invalid_request"},
		{"refresh token requested", xForm("idp-ok", "requested_token_type", "urn:ietf:params:oauth:token-type:refresh_token"), 400, "invalid_request"},
		{"delegation", xForm("idp-ok", "actor_token", "idp-ok", "actor_token_type", TokenTypeJWT), 400, "invalid_request"},
		{"subject_token twice", xForm("idp-ok", "subject_token", "idp-ok"), 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := postToken(t, ep, tc.form)
			if a.status != tc.status || a.err.Error != tc.code || a.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d %s", a.status, a.body)
			}
			if tok := tc.form.Get("subject_token"); tok != "" && strings.Contains(a.body, tok) {
				t.Fatalf("the answer echoes the token: %s", a.body)
			}
		})
	}
}

func TestExchangeChecksClients(t *testing.T) {
	ep, _ := testEndpoint(t)
	ep.Exchange = []SubjectTokenVerifier{&fakeIdP{principal: &Principal{Subject: "s", Provider: "p", ExpiresAt: testNow.Add(time.Hour)}}}
	clients, err := NewClients(map[string]string{"cli": mustHash(t, "secret")})
	if err != nil {
		t.Fatal(err)
	}
	ep.Clients = clients
	if a := postToken(t, ep, xForm("idp-ok")); a.status != 401 || a.err.Error != "invalid_client" {
		t.Fatalf("no client: %d %s", a.status, a.body)
	}
	if a := postToken(t, ep, xForm("idp-ok"), "cli", "secret"); a.status != 200 {
		t.Fatalf("with the client: %d %s", a.status, a.body)
	}
}

// The Bearer rule: a JWT whose iss another authenticator trusts is passed
// on (NotAuthenticated); ours, and any other, are verified here.
func TestBearerPassesOnForeignIssuers(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	ours, _, _ := testIssuer(ring).Issue("alice", []string{"model:qwen"})
	foreign := func(iss string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": iss, "sub": "x", "exp": testNow.Add(time.Hour).Unix()})
		s, _ := tok.SignedString(testKey(9))
		return s
	}
	expired := &Issuer{Keys: ring, Issuer: testIss, Audience: testAud, TTL: time.Second, Now: func() time.Time { return testNow.Add(-time.Hour) }}
	oursExpired, _, _ := expired.Issue("alice", nil)
	b := &BearerAuth{Verifier: testVerifier(ring), Realm: "r", Foreign: func(token string) bool {
		iss, _ := PeekIssuer(token)
		return iss == "https://idp.example"
	}}
	for _, tc := range []struct {
		name, token string
		passOn      bool
		status      int
	}{
		{"ours", ours, false, 200},
		{"ours, expired: refused at once", oursExpired, false, 401},
		{"trusted foreign issuer: passed on", foreign("https://idp.example"), true, 401},
		{"untrusted foreign issuer: refused here", foreign("https://evil.example"), false, 401},
		{"a foreign token claiming our issuer: refused here", foreign(testIss), false, 401}, // Foreign never claims ours
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			p, err := b.Authenticate(r)
			switch {
			case tc.status == 200 && (err != nil || p == nil):
				t.Fatalf("refused: %v", err)
			case tc.status == 200:
			case err == nil:
				t.Fatal("accepted")
			case IsNotAuthenticated(err) != tc.passOn:
				t.Fatalf("passed on %v, want %v (%v)", IsNotAuthenticated(err), tc.passOn, err.Headers)
			}
		})
	}
}
