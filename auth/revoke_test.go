package auth

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/limits"
)

// revokedSet is a Verifier.Revoked of jtis and users.
type revokedSet struct {
	mu    sync.Mutex
	jtis  map[string]bool
	users map[string]bool
}

func (s *revokedSet) revoked(p *Principal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jtis[p.TokenID] || s.users[p.Subject]
}

func TestVerifierRevocation(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	iss := &Issuer{Keys: ring, Issuer: "i", Audience: "a", TTL: time.Hour, Now: fixedNow}
	set := &revokedSet{jtis: map[string]bool{}, users: map[string]bool{}}
	v := &Verifier{Keys: ring, Issuer: "i", Audience: "a", Now: fixedNow, Cache: NewTokenCache(10), Revoked: set.revoked}
	tok, _, _ := iss.Issue("alice", []string{"model:qwen"})
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.TokenID == "" || !p.IssuedAt.Equal(testNow) {
		t.Fatalf("principal lacks its jti or iat: %+v", p)
	}
	// The token is cached now: the cache must not let a revoked token in.
	set.mu.Lock()
	set.jtis[p.TokenID] = true
	set.mu.Unlock()
	if _, err := v.Verify(tok); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a revoked cached token: %v", err)
	}
	if d := DescribeTokenError(ErrRevoked); d != "the access token was revoked" {
		t.Errorf("description %q", d)
	}
	// A fresh (uncached) token of a revoked user.
	set.mu.Lock()
	set.users["bob"] = true
	set.mu.Unlock()
	tok2, _, _ := iss.Issue("bob", nil)
	if _, err := v.Verify(tok2); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a revoked user's new token: %v", err)
	}
}

func TestUsersUsableAndLimits(t *testing.T) {
	h := mustHash(t, "pw")
	u, err := NewUsers([]User{
		{Name: "alice", PasswordHash: h, Limits: &limits.Limit{RPM: 5}},
		{Name: "bob", PasswordHash: h, Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !u.Usable("alice") || u.Usable("bob") || u.Usable("carol") {
		t.Error("Usable wrong")
	}
	if l := u.Limits("alice"); l == nil || l.RPM != 5 {
		t.Errorf("alice's limits %+v", l)
	}
	if u.Limits("bob") != nil {
		t.Error("bob has limits")
	}
	if _, err := NewUsers([]User{{Name: "x", PasswordHash: h, Limits: &limits.Limit{TPM: -5}}}); err == nil {
		t.Error("negative tpm accepted")
	}
	if got := testing.AllocsPerRun(100, func() { u.Usable("alice"); u.Limits("alice") }); got != 0 {
		t.Errorf("Usable and Limits allocate %v times", got)
	}
	// The users file's "limits" field.
	path := filepath.Join(t.TempDir(), "users.json")
	doc := `{"users":[{"username":"carol","password_hash":"` + h + `","limits":{"rpm":10,"tpm":-1,"concurrency":2}}]}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := LoadUsersFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if l := users[0].Limits; l == nil || !reflect.DeepEqual(*l, limits.Limit{RPM: 10, TPM: limits.Off, Concurrency: 2}) {
		t.Errorf("limits from the file: %+v", l)
	}
}

func TestRevokeEndpoint(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	iss := &Issuer{Keys: ring, Issuer: "i", Audience: "a", TTL: time.Hour}
	v := &Verifier{Keys: ring, Issuer: "i", Audience: "a"}
	tok, exp, _ := iss.Issue("alice", nil)
	h := mustHash(t, "secret")
	withClients, _ := NewClients(map[string]string{"app": h})

	tests := []struct {
		name      string
		method    string
		form      string
		basic     [2]string
		clients   *Clients
		failStore bool
		status    int
		revoked   bool
		errCode   string
	}{
		{name: "revokes a valid token", form: "token=" + tok, status: 200, revoked: true},
		{name: "hint access_token", form: "token=" + tok + "&token_type_hint=access_token", status: 200, revoked: true},
		{name: "unknown hint ignored", form: "token=" + tok + "&token_type_hint=refresh_token", status: 200, revoked: true},
		{name: "unknown token: 200, nothing revoked", form: "token=garbage", status: 200},
		{name: "no token", form: "token_type_hint=access_token", status: 400, errCode: "invalid_request"},
		{name: "token twice", form: "token=a&token=b", status: 400, errCode: "invalid_request"},
		{name: "GET", method: "GET", status: 405},
		{name: "client required, none given", form: "token=" + tok, clients: withClients, status: 401, errCode: "invalid_client"},
		{name: "client required, basic auth", form: "token=" + tok, clients: withClients, basic: [2]string{"app", "secret"}, status: 200, revoked: true},
		{name: "client required, form fields", form: "token=" + tok + "&client_id=app&client_secret=secret", clients: withClients, status: 200, revoked: true},
		{name: "store failed: 503, retry", form: "token=" + tok, failStore: true, status: 503, revoked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotJTI string
			var gotExp time.Time
			e := &RevokeEndpoint{Verifier: v, Clients: tt.clients, Realm: "r",
				Revoke: func(_ context.Context, jti string, expires time.Time) error {
					gotJTI, gotExp = jti, expires
					if tt.failStore {
						return errors.New("redis down")
					}
					return nil
				}}
			method := tt.method
			if method == "" {
				method = "POST"
			}
			r := httptest.NewRequest(method, "/auth/revoke", strings.NewReader(tt.form))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.basic[0] != "" {
				r.SetBasicAuth(tt.basic[0], tt.basic[1])
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if w.Header().Get("Cache-Control") != "no-store" {
				t.Error("no Cache-Control: no-store")
			}
			if tt.status == 503 && w.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			if tt.errCode != "" && !strings.Contains(w.Body.String(), `"error":"`+tt.errCode+`"`) {
				t.Errorf("body %s lacks error %s", w.Body, tt.errCode)
			}
			if tt.revoked != (gotJTI != "") {
				t.Fatalf("revoked %q, want revoked=%v", gotJTI, tt.revoked)
			}
			if tt.revoked && !gotExp.Equal(exp) {
				t.Errorf("revoked until %v, want the token's expiry %v", gotExp, exp)
			}
		})
	}
}
