package auth

import (
	"sync"
	"time"
)

// TokenCache remembers tokens that verified, so a client sending the same
// token again skips the signature check (most of the CPU a request costs
// the gateway). An entry is good until the token expires (plus the
// verifier's leeway) and only while the ring still holds its key. Only
// verified tokens are stored, so garbage cannot fill it, and its size is
// bounded: when full it starts over.
type TokenCache struct {
	mu      sync.RWMutex
	max     int
	entries map[string]cachedToken
}

type cachedToken struct {
	principal *Principal
	kid       string
	expires   time.Time
}

// NewTokenCache returns a cache of at most max tokens.
func NewTokenCache(max int) *TokenCache {
	return &TokenCache{max: max, entries: make(map[string]cachedToken)}
}

func (c *TokenCache) get(token string, now time.Time, ring *KeyRing) (*Principal, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.RLock()
	e, ok := c.entries[token]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	if !now.Before(e.expires) {
		c.mu.Lock()
		delete(c.entries, token)
		c.mu.Unlock()
		return nil, false
	}
	if _, ok := ring.lookup(e.kid); !ok {
		return nil, false
	}
	return e.principal, true
}

func (c *TokenCache) put(token, kid string, p *Principal, expires time.Time) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		c.entries = make(map[string]cachedToken, c.max)
	}
	c.entries[token] = cachedToken{principal: p, kid: kid, expires: expires}
	c.mu.Unlock()
}

// verifyCached is Verify's answer for a token the cache holds; cached is
// false, and nothing else told, for any other token.
func (v *Verifier) verifyCached(token string, now time.Time) (p *Principal, err error, cached bool) {
	p, cached = v.Cache.get(token, now, v.Keys)
	if !cached {
		return nil, nil, false
	}
	// It passed every check of Verify when it was cached (the same bytes:
	// the cache's key is the token), its characters' too; only a
	// revocation since is news.
	if v.Revoked != nil && v.Revoked(p) {
		return nil, ErrRevoked, true
	}
	return p, nil, true
}
