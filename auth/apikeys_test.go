package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// clock is a settable test clock.
type clock struct{ t atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.t.Store(testNow.UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.t.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.t.Add(int64(d)) }
func (c *clock) Set(t time.Time)         { c.t.Store(t.UnixNano()) }

func keyUsers(t testing.TB) *Users {
	t.Helper()
	users, err := NewUsers([]User{
		{Name: "alice", PasswordHash: mustHash(t, testPW), Models: []string{"qwen", "gemma"}},
		{Name: "bob", PasswordHash: mustHash(t, testPW), Models: []string{"qwen"}, Disabled: true},
		{Name: "carol", PasswordHash: mustHash(t, testPW), Models: []string{"gemma"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return users
}

func newTestKeys(t testing.TB, st Storage, c *clock) *APIKeys {
	t.Helper()
	k := &APIKeys{Storage: st, Users: keyUsers(t), Now: c.Now, UnknownReloadEvery: -1}
	if err := k.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestAPIKeyFormat(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		k := GenerateAPIKey()
		if len(k) != APIKeyLen || !strings.HasPrefix(k, "llme_") || !IsAPIKey(k) {
			t.Fatalf("key %q: want llme_ and %d characters", k, APIKeyLen)
		}
		for _, c := range k[len(APIKeyPrefix):] {
			if !strings.ContainsRune(base62, c) {
				t.Fatalf("key %q has %q outside base62", k, c)
			}
		}
		if seen[k] {
			t.Fatalf("key %q generated twice", k)
		}
		seen[k] = true
		// A key is a valid RFC 6750 b64token, so it travels as a Bearer
		// credential unchanged.
		if !isB64Token(k) {
			t.Fatalf("key %q is not a b64token", k)
		}
	}
	// 43 base62 characters carry at least 256 bits.
	if bits := 43 * 5.954; bits < 256 {
		t.Fatalf("%v bits", bits)
	}
}

// TestAPIKeyCharactersUniform: rejection sampling leaves no bias; with
// 62 symbols and 200,000 draws each count is 3226 ± ~57 (1σ).
func TestAPIKeyCharactersUniform(t *testing.T) {
	counts := map[rune]int{}
	n := 0
	for n < 200_000 {
		for _, c := range randomBase62(1000) {
			counts[c]++
			n++
		}
	}
	want := n / 62
	for _, c := range base62 {
		if d := counts[c] - want; d < -400 || d > 400 {
			t.Errorf("%q drawn %d times, want about %d", c, counts[c], want)
		}
	}
}

func TestAPIKeyHash(t *testing.T) {
	key := "llme_" + strings.Repeat("a", 43)
	sum := sha256.Sum256([]byte(key))
	if got := HashAPIKey(key); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("HashAPIKey = %s", got)
	}
	if hashAPIKey(key) != sum {
		t.Fatal("hashAPIKey differs from SHA-256")
	}
}

func TestKeyScopes(t *testing.T) {
	tests := []struct {
		name       string
		key, user  []string
		wantScopes []string
	}{
		{"all of the user's", nil, []string{"qwen", "gemma"}, []string{"model:gemma", "model:qwen"}},
		{"narrower", []string{"qwen"}, []string{"qwen", "gemma"}, []string{"model:qwen"}},
		{"clamped to the user", []string{"qwen", "gemma"}, []string{"gemma"}, []string{"model:gemma"}},
		{"user lost every model", []string{"qwen"}, []string{"gemma"}, []string{}},
		{"user without models", nil, nil, []string{}},
		{"duplicates", nil, []string{"qwen", "qwen"}, []string{"model:qwen"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keyScopes(tt.key, tt.user); !slices.Equal(got, tt.wantScopes) {
				t.Fatalf("keyScopes(%v, %v) = %v, want %v", tt.key, tt.user, got, tt.wantScopes)
			}
		})
	}
}

func TestAPIKeyCreateValidation(t *testing.T) {
	c := newClock()
	k := newTestKeys(t, newMemStorage(), c)
	if _, _, err := k.Create(context.Background(), NewAPIKey{User: "alice", Name: "taken"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  NewAPIKey
		want error
		msg  string
	}{
		{"no user", NewAPIKey{}, ErrAPIKeyRequest, "user is required"},
		{"unknown user", NewAPIKey{User: "mallory"}, ErrAPIKeyRequest, `no user "mallory"`},
		{"disabled user", NewAPIKey{User: "bob"}, ErrAPIKeyRequest, `user "bob" is disabled`},
		{"model beyond the user's", NewAPIKey{User: "carol", Models: []string{"qwen"}}, ErrAPIKeyRequest, `may not use model "qwen"`},
		{"bad name", NewAPIKey{User: "alice", Name: "a b"}, ErrAPIKeyRequest, "may only hold"},
		{"long name", NewAPIKey{User: "alice", Name: strings.Repeat("n", 65)}, ErrAPIKeyRequest, "longer than 64"},
		{"negative ttl", NewAPIKey{User: "alice", TTL: -time.Hour}, ErrAPIKeyRequest, "positive duration"},
		{"name taken", NewAPIKey{User: "alice", Name: "taken"}, ErrAPIKeyConflict, "taken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, _, err := k.Create(context.Background(), tt.req)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) || key != "" {
				t.Fatalf("Create(%+v) = %q, %v; want %v containing %q", tt.req, key, err, tt.want, tt.msg)
			}
		})
	}
	if k.Len() != 1 {
		t.Fatalf("%d keys stored after refused requests", k.Len())
	}
}

func TestAPIKeyVerify(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	st := newMemStorage()
	k := newTestKeys(t, st, c)
	all, info, err := k.Create(ctx, NewAPIKey{User: "alice", Name: "all", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if info.User != "alice" || info.Name != "all" || !info.Expires.Equal(c.Now().Add(time.Hour)) || len(info.Models) != 0 {
		t.Fatalf("info %+v", info)
	}
	qwen, _, _ := k.Create(ctx, NewAPIKey{User: "alice", Models: []string{"qwen"}, TTL: 2 * time.Hour})
	carol, _, _ := k.Create(ctx, NewAPIKey{User: "carol"})

	tests := []struct {
		name   string
		key    string
		want   error
		scopes []string
	}{
		{"every model of the user", all, nil, []string{"model:gemma", "model:qwen"}},
		{"scoped", qwen, nil, []string{"model:qwen"}},
		{"another user", carol, nil, []string{"model:gemma"}},
		{"unknown", GenerateAPIKey(), ErrAPIKeyInvalid, nil},
		{"one character off", all[:len(all)-1] + string(all[len(all)-1]^1), ErrAPIKeyInvalid, nil},
		{"too short", all[:len(all)-1], ErrAPIKeyInvalid, nil},
		{"too long", all + "x", ErrAPIKeyInvalid, nil},
		{"other prefix", "llmx_" + all[5:], ErrAPIKeyInvalid, nil},
		{"empty", "", ErrAPIKeyInvalid, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := k.Verify(tt.key)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
			if err == nil && !slices.Equal(p.Scopes, tt.scopes) {
				t.Fatalf("scopes %v, want %v", p.Scopes, tt.scopes)
			}
			if err == nil && (p.KeyID == "" || p.Subject == "") {
				t.Fatalf("principal %+v", p)
			}
		})
	}

	// Expiry: qwen lives 2h, all 1h.
	c.Advance(time.Hour)
	if _, err := k.Verify(all); !errors.Is(err, ErrAPIKeyExpired) {
		t.Fatalf("expired key: %v", err)
	}
	if _, err := k.Verify(qwen); err != nil {
		t.Fatalf("key with an hour left: %v", err)
	}
	infos, err := k.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expired := map[string]bool{}
	for _, i := range infos {
		expired[i.Name] = i.Expired
	}
	if !expired["all"] || len(infos) != 3 {
		t.Fatalf("list after expiry: %+v", infos)
	}

	// The user is disabled, then removed, then back: the key follows.
	hash := mustHash(t, testPW)
	if err := k.Users.Replace([]User{{Name: "alice", PasswordHash: hash, Models: []string{"qwen"}, Disabled: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(qwen); !errors.Is(err, ErrAPIKeyInvalid) {
		t.Fatalf("disabled user's key: %v", err)
	}
	if err := k.Users.Replace(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(qwen); !errors.Is(err, ErrAPIKeyInvalid) {
		t.Fatalf("removed user's key: %v", err)
	}
	// Back, but without qwen: the key authenticates with no scope at all.
	if err := k.Users.Replace([]User{{Name: "alice", PasswordHash: hash, Models: []string{"gemma"}}}); err != nil {
		t.Fatal(err)
	}
	if p, err := k.Verify(qwen); err != nil || len(p.Scopes) != 0 {
		t.Fatalf("key of a user who lost its model: %+v %v", p, err)
	}
}

func TestAPIKeyRevoke(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	k := newTestKeys(t, newMemStorage(), c)
	byName, _, _ := k.Create(ctx, NewAPIKey{User: "alice", Name: "ci"})
	byID, info, _ := k.Create(ctx, NewAPIKey{User: "alice"})
	other, _, _ := k.Create(ctx, NewAPIKey{User: "alice", Name: "other"})

	tests := []struct {
		ref  string
		gone string
		want error
	}{
		{"ci", byName, nil},
		{info.ID, byID, nil},
		{"ci", "", ErrAPIKeyNotFound}, // twice
		{"", "", ErrAPIKeyNotFound},
		{"nope", "", ErrAPIKeyNotFound},
	}
	for _, tt := range tests {
		got, err := k.Revoke(ctx, tt.ref)
		if !errors.Is(err, tt.want) {
			t.Fatalf("Revoke(%q): %v, want %v", tt.ref, err, tt.want)
		}
		if tt.gone != "" {
			if got.Name != tt.ref && got.ID != tt.ref {
				t.Fatalf("Revoke(%q) revoked %+v", tt.ref, got)
			}
			if _, err := k.Verify(tt.gone); !errors.Is(err, ErrAPIKeyInvalid) {
				t.Fatalf("revoked key still verifies: %v", err)
			}
		}
	}
	if _, err := k.Verify(other); err != nil {
		t.Fatalf("a key nobody revoked: %v", err)
	}
	// A freed name can be used again.
	if _, _, err := k.Create(ctx, NewAPIKey{User: "alice", Name: "ci"}); err != nil {
		t.Fatalf("reusing a revoked key's name: %v", err)
	}
}

// TestAPIKeysFileStorage: two instances sharing Caddy's file storage see
// each other's creations and revocations, the stored file never holds a
// key, and last-used times merge without going backwards.
func TestAPIKeysFileStorage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := newClock()
	a := newTestKeys(t, &certmagic.FileStorage{Path: dir}, c)
	b := newTestKeys(t, &certmagic.FileStorage{Path: dir}, c)

	key, info, err := a.Create(ctx, NewAPIKey{User: "alice", Name: "ci", Models: []string{"qwen"}, TTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(key); !errors.Is(err, ErrAPIKeyInvalid) {
		t.Fatalf("b knew the key before reloading: %v", err)
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Verify(key); err != nil || p.Subject != "alice" || !slices.Equal(p.Scopes, []string{"model:qwen"}) {
		t.Fatalf("b after reload: %+v %v", p, err)
	}

	raw, err := (&certmagic.FileStorage{Path: dir}).Load(ctx, DefaultAPIKeysStorageKey)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), key) || strings.Contains(string(raw), key[len(APIKeyPrefix):]) {
		t.Fatal("the stored file holds the key")
	}
	var f apiKeyFile
	if err := json.Unmarshal(raw, &f); err != nil || len(f.Keys) != 1 || f.Keys[0].SHA256 != HashAPIKey(key) || f.Keys[0].ID != info.ID {
		t.Fatalf("stored %s", raw)
	}

	// Last use: b uses the key later than a; both flush; the later wins.
	if _, err := a.Verify(key); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if _, err := b.Verify(key); err != nil {
		t.Fatal(err)
	}
	later := c.Now().Truncate(time.Second)
	if err := b.FlushUsage(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.FlushUsage(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].LastUsed == nil || !infos[0].LastUsed.Equal(later) {
		t.Fatalf("last used %+v, want %v", infos, later)
	}
	// Nothing new to flush: no write.
	st := &countingStorage{Storage: &certmagic.FileStorage{Path: dir}}
	a.Storage = st
	if err := a.FlushUsage(ctx); err != nil || st.stores != 0 {
		t.Fatalf("flush without new uses: %v, %d stores", err, st.stores)
	}

	// Revoked on a: refused by a at once, by b after its reload.
	if _, err := a.Revoke(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(key); !errors.Is(err, ErrAPIKeyInvalid) {
		t.Fatalf("a after revoking: %v", err)
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(key); !errors.Is(err, ErrAPIKeyInvalid) {
		t.Fatalf("b after reloading: %v", err)
	}
}

type countingStorage struct {
	Storage
	stores int
}

func (s *countingStorage) Store(ctx context.Context, key string, value []byte) error {
	s.stores++
	return s.Storage.Store(ctx, key, value)
}

// TestAPIKeyUnknownReload: an unknown key makes the store reload, at most
// once per interval, so a key created on another instance works at once
// and garbage keys cost at most one storage read per interval.
func TestAPIKeyUnknownReload(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	st := newMemStorage()
	creator := newTestKeys(t, st, c)
	loads := &loadCounter{Storage: st}
	k := &APIKeys{Storage: loads, Users: keyUsers(t), Now: c.Now, UnknownReloadEvery: time.Hour}
	key, _, err := creator.Create(ctx, NewAPIKey{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(key); err != nil {
		t.Fatalf("key created elsewhere: %v", err)
	}
	for range 100 {
		if _, err := k.Verify(GenerateAPIKey()); !errors.Is(err, ErrAPIKeyInvalid) {
			t.Fatal(err)
		}
	}
	if loads.n.Load() != 1 {
		t.Fatalf("%d storage reads, want 1", loads.n.Load())
	}
}

type loadCounter struct {
	Storage
	n atomic.Int64
}

func (l *loadCounter) Load(ctx context.Context, key string) ([]byte, error) {
	l.n.Add(1)
	return l.Storage.Load(ctx, key)
}

func TestAPIKeysCorruptFile(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	st := newMemStorage()
	k := newTestKeys(t, st, c)
	key, _, _ := k.Create(ctx, NewAPIKey{User: "alice"})
	for name, data := range map[string]string{
		"not JSON":    "{",
		"newer":       `{"version":99,"keys":[]}`,
		"bad hash":    `{"version":1,"keys":[{"id":"a","user":"alice","sha256":"zz"}]}`,
		"long hash":   `{"version":1,"keys":[{"id":"a","user":"alice","sha256":"` + strings.Repeat("ab", 40) + `"}]}`,
		"no id":       `{"version":1,"keys":[{"user":"alice","sha256":"` + strings.Repeat("ab", 32) + `"}]}`,
		"id repeated": `{"version":1,"keys":[{"id":"a","sha256":"` + strings.Repeat("ab", 32) + `"},{"id":"a","sha256":"` + strings.Repeat("cd", 32) + `"}]}`,
	} {
		_ = st.Store(ctx, DefaultAPIKeysStorageKey, []byte(data))
		if err := k.Reload(ctx); err == nil {
			t.Errorf("%s: reloaded", name)
		}
		if _, err := k.Verify(key); err != nil {
			t.Errorf("%s: the keys in memory were dropped: %v", name, err)
		}
	}
}

func TestBearerAuthAPIKeys(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	ring := NewKeyRing(testKey(1))
	keys := newTestKeys(t, newMemStorage(), c)
	key, _, _ := keys.Create(ctx, NewAPIKey{User: "alice", Models: []string{"gemma"}, TTL: time.Minute})
	tok, _, _ := testIssuer(ring).Issue("alice", []string{"model:qwen"})
	b := &BearerAuth{Verifier: testVerifier(ring), Realm: "llmedge", APIKeys: keys}
	tests := []struct {
		name, header string
		sub, scope   string
		desc         string
	}{
		{"api key", "Bearer " + key, "alice", "model:gemma", ""},
		{"jwt", "Bearer " + tok, "alice", "model:qwen", ""},
		{"unknown key", "Bearer " + GenerateAPIKey(), "", "", "the API key is invalid or revoked"},
		{"refresh token", "Bearer " + newRefreshToken(strings.Repeat("0", 32)), "", "", "a refresh token is not an access token"},
		{"no header", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			p, apiErr := b.Authenticate(r)
			if tt.sub != "" {
				if apiErr != nil || p.Subject != tt.sub || !p.HasScope(tt.scope) {
					t.Fatalf("%+v %v", p, apiErr)
				}
				return
			}
			if apiErr == nil || apiErr.Status != 401 || !strings.Contains(apiErr.Headers["WWW-Authenticate"], tt.desc) {
				t.Fatalf("%+v", apiErr)
			}
		})
	}
	c.Advance(time.Minute)
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	if _, apiErr := b.Authenticate(r); apiErr == nil || !strings.Contains(apiErr.Headers["WWW-Authenticate"], "the API key expired") {
		t.Fatalf("expired key: %+v", apiErr)
	}
	// Without APIKeys, a key is just a malformed access token.
	b.APIKeys = nil
	r.Header.Set("Authorization", "Bearer "+key)
	if _, apiErr := b.Authenticate(r); apiErr == nil || apiErr.Status != 401 {
		t.Fatalf("key accepted without APIKeys: %+v", apiErr)
	}
}

// FuzzAPIKeyVerify: only the exact key issued verifies, and nothing
// panics.
func FuzzAPIKeyVerify(f *testing.F) {
	c := newClock()
	k := newTestKeys(f, newMemStorage(), c)
	// A fixed key, stored by hand, so every fuzz worker knows the same.
	const key = "llme_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg"
	file := apiKeyFile{Version: 1, Keys: []APIKey{{ID: "fuzz", User: "alice", SHA256: HashAPIKey(key),
		Created: testNow, Expires: testNow.Add(time.Hour)}}}
	b, _ := json.Marshal(file)
	if err := k.Storage.Store(context.Background(), DefaultAPIKeysStorageKey, b); err != nil {
		f.Fatal(err)
	}
	if err := k.Reload(context.Background()); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{key, "", "llme_", key[:len(key)-1], strings.ToUpper(key), key + key} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := k.Verify(s); err == nil && s != key {
			t.Fatalf("accepted %q", s)
		}
	})
}

// BenchmarkCredential compares what a request's credential costs: an API key
// (a SHA-256 and a map lookup), a JWT's signature check (EdDSA), and a JWT
// found in the verified-token cache.
func BenchmarkCredential(b *testing.B) {
	c := newClock()
	keys := newTestKeys(b, newMemStorage(), c)
	key, _, err := keys.Create(context.Background(), NewAPIKey{User: "alice", Models: []string{"qwen"}})
	if err != nil {
		b.Fatal(err)
	}
	ring := NewKeyRing(testKey(1))
	tok, _, _ := testIssuer(ring).Issue("alice", []string{"model:qwen"})
	b.Run("api_key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := keys.Verify(key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("api_key_parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := keys.Verify(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("jwt_eddsa", func(b *testing.B) {
		v := testVerifier(ring)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jwt_cached", func(b *testing.B) {
		v := testVerifier(ring)
		v.Cache = NewTokenCache(100)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Whole Bearer step as the pipeline runs it: header parsing included.
	auth := &BearerAuth{Verifier: testVerifier(ring), Realm: "llmedge", APIKeys: keys}
	for name, cred := range map[string]string{"bearer_api_key": key, "bearer_jwt_eddsa": tok} {
		b.Run(name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.Header.Set("Authorization", "Bearer "+cred)
			b.ReportAllocs()
			for b.Loop() {
				if _, apiErr := auth.Authenticate(r); apiErr != nil {
					b.Fatal(apiErr)
				}
			}
		})
	}
}
