package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// refreshEndpoint is testEndpoint with refresh tokens on, in memory.
func refreshEndpoint(t testing.TB, c *clock) (*TokenEndpoint, *memStorage) {
	t.Helper()
	ep, _ := testEndpoint(t)
	st := newMemStorage()
	ep.Refresh = newTestRefresh(st, c)
	return ep, st
}

type tokenAnswer struct {
	status int
	body   string
	resp   TokenResponse
	err    struct {
		Detail           string `json:"detail"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	header http.Header
}

func postToken(t testing.TB, ep *TokenEndpoint, form url.Values, basic ...string) tokenAnswer {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/auth/token", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", formCT)
	if len(basic) == 2 {
		r.SetBasicAuth(basic[0], basic[1])
	}
	w := httptest.NewRecorder()
	ep.ServeHTTP(w, r)
	a := tokenAnswer{status: w.Code, body: w.Body.String(), header: w.Header()}
	if w.Code == 200 {
		_ = json.Unmarshal(w.Body.Bytes(), &a.resp)
	} else {
		_ = json.Unmarshal(w.Body.Bytes(), &a.err)
	}
	return a
}

func login(t testing.TB, ep *TokenEndpoint, user, scope string) TokenResponse {
	t.Helper()
	a := postToken(t, ep, url.Values{"username": {user}, "password": {testPW}, "scope": {scope}})
	if a.status != 200 || a.resp.RefreshToken == "" {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	return a.resp
}

func refreshForm(tok, scope string) url.Values {
	f := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}
	if scope != "" {
		f.Set("scope", scope)
	}
	return f
}

func TestRefreshGrant(t *testing.T) {
	c := newClock()
	ep, _ := refreshEndpoint(t, c)
	v := testVerifier(ep.Issuer.Keys)
	first := login(t, ep, "alice", "")
	if first.Scope != "model:gemma model:qwen" {
		t.Fatalf("login scope %q", first.Scope)
	}
	a := postToken(t, ep, refreshForm(first.RefreshToken, ""))
	if a.status != 200 || a.resp.RefreshToken == "" || a.resp.RefreshToken == first.RefreshToken ||
		a.resp.Scope != first.Scope || a.resp.TokenType != "bearer" || a.resp.ExpiresIn != 3600 {
		t.Fatalf("refresh: %d %s", a.status, a.body)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Fatal("no Cache-Control: no-store")
	}
	if p, err := v.Verify(a.resp.AccessToken); err != nil || p.Subject != "alice" {
		t.Fatalf("refreshed access token: %v", err)
	}
	// Narrower scope for one access token; the next refresh may ask for
	// the login's full scope again (RFC 6749 §6).
	narrow := postToken(t, ep, refreshForm(a.resp.RefreshToken, "model:qwen"))
	if narrow.status != 200 || narrow.resp.Scope != "model:qwen" {
		t.Fatalf("narrowed: %d %s", narrow.status, narrow.body)
	}
	full := postToken(t, ep, refreshForm(narrow.resp.RefreshToken, ""))
	if full.status != 200 || full.resp.Scope != "model:gemma model:qwen" {
		t.Fatalf("after narrowing: %d %s", full.status, full.body)
	}
}

func TestRefreshGrantErrors(t *testing.T) {
	c := newClock()
	const invalidGrant = "invalid_grant"
	tests := []struct {
		name string
		// prepare returns the form to post, given a fresh login of alice
		// limited to model:qwen.
		prepare    func(t *testing.T, ep *TokenEndpoint, rt string) url.Values
		wantStatus int
		wantError  string
		wantDetail string
	}{
		{"missing refresh_token", func(*testing.T, *TokenEndpoint, string) url.Values {
			return url.Values{"grant_type": {"refresh_token"}}
		}, 400, "invalid_request", detailRefreshMissing},
		{"repeated refresh_token", func(_ *testing.T, _ *TokenEndpoint, rt string) url.Values {
			return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt, rt}}
		}, 400, "invalid_request", "Parameter refresh_token was given more than once"},
		{"garbage", func(*testing.T, *TokenEndpoint, string) url.Values {
			return refreshForm("not-a-token", "")
		}, 400, invalidGrant, DetailRefreshInvalid},
		{"an access token", func(t *testing.T, ep *TokenEndpoint, _ string) url.Values {
			return refreshForm(login(t, ep, "alice", "").AccessToken, "")
		}, 400, invalidGrant, DetailRefreshInvalid},
		{"wider scope than the login's", func(_ *testing.T, _ *TokenEndpoint, rt string) url.Values {
			return refreshForm(rt, "model:qwen model:gemma")
		}, 400, "invalid_scope", "Requested scope exceeds the scope of the login: model:gemma"},
		{"malformed scope", func(_ *testing.T, _ *TokenEndpoint, rt string) url.Values {
			return refreshForm(rt, "model:q\"wen")
		}, 400, "invalid_scope", "Requested scope is malformed"},
		{"reused", func(t *testing.T, ep *TokenEndpoint, rt string) url.Values {
			if a := postToken(t, ep, refreshForm(rt, "")); a.status != 200 {
				t.Fatalf("first use: %d %s", a.status, a.body)
			}
			return refreshForm(rt, "")
		}, 400, invalidGrant, DetailRefreshReused},
		{"expired", func(_ *testing.T, _ *TokenEndpoint, rt string) url.Values {
			c.Advance(24 * time.Hour)
			return refreshForm(rt, "")
		}, 400, invalidGrant, DetailRefreshExpired},
		{"user disabled since", func(t *testing.T, ep *TokenEndpoint, rt string) url.Values {
			if err := ep.Users.Replace([]User{{Name: "alice", PasswordHash: mustHash(t, testPW), Models: []string{"qwen"}, Disabled: true}}); err != nil {
				t.Fatal(err)
			}
			return refreshForm(rt, "")
		}, 400, invalidGrant, DetailRefreshUser},
		{"user removed since", func(t *testing.T, ep *TokenEndpoint, rt string) url.Values {
			if err := ep.Users.Replace(nil); err != nil {
				t.Fatal(err)
			}
			return refreshForm(rt, "")
		}, 400, invalidGrant, DetailRefreshUser},
		{"turned off", func(_ *testing.T, ep *TokenEndpoint, rt string) url.Values {
			ep.Refresh = nil
			return refreshForm(rt, "")
		}, 400, "unsupported_grant_type", detailRefreshOff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Set(testNow)
			ep, _ := refreshEndpoint(t, c)
			rt := login(t, ep, "alice", "model:qwen").RefreshToken
			a := postToken(t, ep, tt.prepare(t, ep, rt))
			if a.status != tt.wantStatus || a.err.Error != tt.wantError || a.err.Detail != tt.wantDetail || a.err.ErrorDescription != tt.wantDetail {
				t.Fatalf("got %d %s\nwant %d %s %q", a.status, a.body, tt.wantStatus, tt.wantError, tt.wantDetail)
			}
			if strings.Contains(a.body, rt) || strings.Contains(a.body, rt[len(rt)-43:]) {
				t.Fatal("the answer echoes the refresh token")
			}
			if a.header.Get("WWW-Authenticate") != "" {
				t.Fatal("WWW-Authenticate on a 400")
			}
		})
	}
}

// TestRefreshGrantUserLostModel: a refresh never grants a model the user
// no longer has, even one the login was granted.
func TestRefreshGrantUserLostModel(t *testing.T) {
	c := newClock()
	ep, _ := refreshEndpoint(t, c)
	rt := login(t, ep, "alice", "").RefreshToken
	if err := ep.Users.Replace([]User{{Name: "alice", PasswordHash: mustHash(t, testPW), Models: []string{"gemma"}}}); err != nil {
		t.Fatal(err)
	}
	a := postToken(t, ep, refreshForm(rt, ""))
	if a.status != 200 || a.resp.Scope != "model:gemma" {
		t.Fatalf("%d %s", a.status, a.body)
	}
	b := postToken(t, ep, refreshForm(a.resp.RefreshToken, "model:qwen"))
	if b.status != 400 || b.err.Error != "invalid_scope" {
		t.Fatalf("asking for the lost model: %d %s", b.status, b.body)
	}
}

// TestRefreshGrantClients: with OAuth clients, a refresh token works only
// for the client it was issued to, which must authenticate.
func TestRefreshGrantClients(t *testing.T) {
	c := newClock()
	ep, _ := refreshEndpoint(t, c)
	clients, err := NewClients(map[string]string{"app": mustHash(t, "app-secret"), "other": mustHash(t, "other-secret")})
	if err != nil {
		t.Fatal(err)
	}
	ep.Clients = clients
	a := postToken(t, ep, url.Values{"username": {"alice"}, "password": {testPW}}, "app", "app-secret")
	if a.status != 200 || a.resp.RefreshToken == "" {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	rt := a.resp.RefreshToken
	tests := []struct {
		name       string
		basic      []string
		form       url.Values
		wantStatus int
		wantError  string
	}{
		{"no client", nil, refreshForm(rt, ""), 401, "invalid_client"},
		{"wrong secret", []string{"app", "nope"}, refreshForm(rt, ""), 401, "invalid_client"},
		{"another client", []string{"other", "other-secret"}, refreshForm(rt, ""), 400, "invalid_grant"},
		{"the client, in the form", nil, func() url.Values {
			f := refreshForm(rt, "")
			f.Set("client_id", "app")
			f.Set("client_secret", "app-secret")
			return f
		}(), 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := postToken(t, ep, tt.form, tt.basic...)
			if got.status != tt.wantStatus || got.err.Error != tt.wantError {
				t.Fatalf("%d %s", got.status, got.body)
			}
			if tt.wantError == "invalid_grant" && got.err.Detail != DetailRefreshClient {
				t.Fatalf("detail %q", got.err.Detail)
			}
		})
	}
}

func TestRefreshGrantStorageDown(t *testing.T) {
	c := newClock()
	ep, _ := testEndpoint(t)
	st := &failingStorage{memStorage: newMemStorage()}
	ep.Refresh = newTestRefresh(st, c)
	var reported []error
	ep.OnError = func(err error) { reported = append(reported, err) }
	rt := login(t, ep, "alice", "").RefreshToken

	st.failStore = true
	a := postToken(t, ep, refreshForm(rt, ""))
	if a.status != 503 || a.err.Detail != DetailStorageDown || a.header.Get("Retry-After") == "" {
		t.Fatalf("refresh with the storage down: %d %s", a.status, a.body)
	}
	// A login still works, without a refresh token.
	l := postToken(t, ep, url.Values{"username": {"alice"}, "password": {testPW}})
	if l.status != 200 || l.resp.AccessToken == "" || l.resp.RefreshToken != "" || strings.Contains(l.body, "refresh_token") {
		t.Fatalf("login with the storage down: %d %s", l.status, l.body)
	}
	if len(reported) != 2 {
		t.Fatalf("reported %v", reported)
	}
	for _, err := range reported {
		if strings.Contains(err.Error(), rt) {
			t.Fatal("a reported error holds the token")
		}
	}
	st.failStore = false
	if a := postToken(t, ep, refreshForm(rt, "")); a.status != 200 {
		t.Fatalf("after the storage came back: %d %s", a.status, a.body)
	}
}

// TestRefreshGrantLimiter: failed refreshes count against the client's
// address, as failed logins do.
func TestRefreshGrantLimiter(t *testing.T) {
	c := newClock()
	ep, _ := refreshEndpoint(t, c)
	ep.AddrLimiter = NewFailureLimiter(3, time.Minute, c.Now)
	for range 3 {
		if a := postToken(t, ep, refreshForm(newRefreshToken(strings.Repeat("0", 32)), "")); a.status != 400 {
			t.Fatalf("%d %s", a.status, a.body)
		}
	}
	if a := postToken(t, ep, refreshForm("x", "")); a.status != 429 || a.header.Get("Retry-After") == "" {
		t.Fatalf("after 3 failures: %d %s", a.status, a.body)
	}
}

func TestRefreshGrantPatternWhenOn(t *testing.T) {
	ep, _ := refreshEndpoint(t, newClock())
	a := postToken(t, ep, url.Values{"grant_type": {"client_credentials"}, "username": {"alice"}, "password": {testPW}})
	if a.status != 422 || !strings.Contains(a.body, `"pattern":"^(password|refresh_token)$"`) {
		t.Fatalf("%d %s", a.status, a.body)
	}
}

// FuzzRefreshGrant posts arbitrary refresh_token and scope fields to an
// endpoint that issued one real token: anything else must get a 400 that
// does not echo it.
func FuzzRefreshGrant(f *testing.F) {
	c := newClock()
	ep, _ := refreshEndpoint(f, c)
	rt := login(f, ep, "alice", "").RefreshToken
	family, _ := parseRefreshToken(rt)
	for _, s := range []string{rt, "", "llmr_", "llmr_" + family + "_", rt[:len(rt)-1] + "!", strings.ToUpper(rt), rt + rt} {
		f.Add(s, "")
		f.Add(s, "model:qwen")
	}
	f.Add(rt, "model:llama")
	f.Add(rt, "\x00")
	known := map[int]bool{200: true, 400: true}
	f.Fuzz(func(t *testing.T, tok, scope string) {
		// The real token is left out: its use would rotate the family and
		// make later inputs depend on earlier ones. Everything else must
		// fail without changing anything.
		if tok == rt {
			return
		}
		a := postToken(t, ep, refreshForm(tok, scope))
		if !known[a.status] || a.status == 200 {
			t.Fatalf("refresh_token %q scope %q: %d %s", tok, scope, a.status, a.body)
		}
		if len(tok) > 8 && strings.Contains(a.body, tok) {
			t.Fatalf("the answer echoes the token: %s", a.body)
		}
	})
}

// A user revoked after a login (llmedge revoke --user) can no longer use
// that login's refresh token; a later login works.
func TestRefreshRefusedAfterUserRevocation(t *testing.T) {
	c := newClock()
	ep, _ := refreshEndpoint(t, c)
	first := login(t, ep, "alice", "")
	var cutoff time.Time
	ep.UserRevoked = func(user string, loginAt time.Time) bool { return user == "alice" && loginAt.Before(cutoff) }
	cutoff = c.Now().Add(time.Second)
	a := postToken(t, ep, refreshForm(first.RefreshToken, ""))
	if a.status != 400 || a.err.Error != "invalid_grant" || a.err.Detail != DetailRefreshRevoked {
		t.Fatalf("refresh of a revoked user's login: %d %s", a.status, a.body)
	}
	c.Advance(2 * time.Second)
	again := login(t, ep, "alice", "")
	if a := postToken(t, ep, refreshForm(again.RefreshToken, "")); a.status != 200 {
		t.Fatalf("a login after the revocation: %d %s", a.status, a.body)
	}
}

// RFC 7009 on a refresh token revokes its family: the token, the tokens it
// replaced and any issued from it.
func TestRevokeEndpointRefreshToken(t *testing.T) {
	c := newClock()
	ep, _ := refreshEndpoint(t, c)
	first := login(t, ep, "alice", "")
	second := postToken(t, ep, refreshForm(first.RefreshToken, "")).resp
	rev := &RevokeEndpoint{Verifier: testVerifier(ep.Issuer.Keys), Realm: "r", Refresh: ep.Refresh,
		Revoke: func(context.Context, string, time.Time) error { t.Fatal("an access-token revocation"); return nil }}
	r := httptest.NewRequest("POST", "/auth/revoke", strings.NewReader("token="+second.RefreshToken))
	r.Header.Set("Content-Type", formCT)
	w := httptest.NewRecorder()
	rev.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("revoke: %d %s", w.Code, w.Body)
	}
	for name, tok := range map[string]string{"revoked": second.RefreshToken, "replaced": first.RefreshToken} {
		if a := postToken(t, ep, refreshForm(tok, "")); a.status != 400 || a.err.Detail != DetailRefreshRevoked {
			t.Errorf("%s token after revocation: %d %s", name, a.status, a.body)
		}
	}
	// An unknown refresh token: 200, nothing to do (§2.2).
	r = httptest.NewRequest("POST", "/auth/revoke", strings.NewReader("token="+second.RefreshToken[:len(second.RefreshToken)-3]+"abc"))
	r.Header.Set("Content-Type", formCT)
	w = httptest.NewRecorder()
	rev.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("unknown refresh token: %d %s", w.Code, w.Body)
	}
}
