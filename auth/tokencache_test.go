package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestTokenCache(t *testing.T) {
	now := testNow
	clock := func() time.Time { return now }
	st := newMemStorage()
	ring, err := LoadOrCreateKeyRing(context.Background(), st, "k")
	if err != nil {
		t.Fatal(err)
	}
	iss := &Issuer{Keys: ring, Issuer: "i", Audience: "a", TTL: time.Minute, Now: clock}
	v := &Verifier{Keys: ring, Issuer: "i", Audience: "a", Now: clock, Cache: NewTokenCache(2)}
	tok, _, _ := iss.Issue("alice", []string{"model:qwen"})

	first, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	second, err := v.Verify(tok)
	if err != nil || second != first {
		t.Fatalf("second verification did not come from the cache: %v", err)
	}
	// A tampered token is not a cache hit.
	if _, err := v.Verify(tok + "x"); err == nil {
		t.Fatal("tampered token accepted")
	}
	// Past its expiry the cached token is refused like any other.
	now = now.Add(2 * time.Minute)
	if _, err := v.Verify(tok); err == nil {
		t.Fatal("expired token accepted from the cache")
	}
	now = testNow
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	// Once its key has left the ring, the cached token no longer verifies.
	other := NewKeyRing(testKey(9))
	ring.Replace(other)
	if _, err := v.Verify(tok); err == nil {
		t.Fatal("token of a removed key accepted from the cache")
	}
	// The cache stays bounded.
	ring.Replace(NewKeyRing(testKey(1)))
	iss.Keys = ring
	for i := 0; i < 10; i++ {
		tk, _, _ := iss.Issue(string(rune('a'+i)), nil)
		if _, err := v.Verify(tk); err != nil {
			t.Fatal(err)
		}
		if n := len(v.Cache.entries); n > 2 {
			t.Fatalf("cache grew to %d", n)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	ring := NewKeyRing(testKey(1))
	iss := &Issuer{Keys: ring, Issuer: "i", Audience: "a", TTL: time.Hour}
	tok, _, _ := iss.Issue("alice", []string{"model:qwen"})
	for _, tc := range []struct {
		name  string
		cache *TokenCache
	}{{"signature", nil}, {"cached", NewTokenCache(1000)}} {
		v := &Verifier{Keys: ring, Issuer: "i", Audience: "a", Cache: tc.cache}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBearerAuthCached: BearerAuth answers a cached token from the cache
// (before scanning its characters) with Verify's answer: the same
// principal, a revocation since then refused, and a malformed token,
// never cached, still refused as malformed.
func TestBearerAuthCached(t *testing.T) {
	clock := func() time.Time { return testNow }
	ring, err := LoadOrCreateKeyRing(context.Background(), newMemStorage(), "k")
	if err != nil {
		t.Fatal(err)
	}
	iss := &Issuer{Keys: ring, Issuer: "i", Audience: "a", TTL: time.Minute, Now: clock}
	revoked := false
	v := &Verifier{Keys: ring, Issuer: "i", Audience: "a", Now: clock, Cache: NewTokenCache(4),
		Revoked: func(*Principal) bool { return revoked }}
	b := &BearerAuth{Verifier: v, Realm: "r"}
	tok, _, _ := iss.Issue("alice", []string{"model:qwen"})
	req := func(token string) *http.Request {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return r
	}
	first, aerr := b.Authenticate(req(tok))
	if aerr != nil || first.Subject != "alice" {
		t.Fatalf("first request: %+v %v", first, aerr)
	}
	if _, ok := v.Cache.get(tok, testNow, ring); !ok {
		t.Fatal("the verified token was not cached")
	}
	if again, aerr := b.Authenticate(req(tok)); aerr != nil || again != first {
		t.Fatalf("second request: %+v %v, want the cached principal", again, aerr)
	}
	revoked = true
	if _, aerr := b.Authenticate(req(tok)); aerr == nil || aerr.Status != http.StatusUnauthorized {
		t.Fatalf("a revoked cached token: %v, want a 401", aerr)
	}
	revoked = false
	_, aerr = b.Authenticate(req(tok[:20] + "\x01" + tok[21:]))
	if aerr == nil || !strings.Contains(aerr.Headers["WWW-Authenticate"], "malformed") {
		t.Fatalf("a malformed token: %v", aerr)
	}
}
