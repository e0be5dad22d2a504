package auth

import (
	"context"
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
