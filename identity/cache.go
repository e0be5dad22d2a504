package identity

import (
	"sync"
	"time"

	"github.com/llmedge/llmedge/auth"
)

// tokenCache remembers verified tokens, so a client sending the same
// token again skips the signature check and the claims' decoding. An
// entry is good until the token expires (plus the skew) and only while
// its issuer still publishes its key: a key the provider removed stops
// its cached tokens at the next refresh. Only verified tokens are stored,
// so garbage cannot fill it; when full it starts over.
type tokenCache struct {
	mu      sync.RWMutex
	max     int
	entries map[string]cacheEntry
}

type cacheEntry struct {
	principal *auth.Principal
	trust     *trust
	kid       string
	set       *keySet // the keys it verified with, for a token without a kid
	expires   time.Time
}

// valid reports whether the entry's key is still published.
func (e *cacheEntry) valid() bool {
	cur := e.trust.src.set.Load()
	if e.kid == "" {
		return cur == e.set
	}
	_, ok := cur.lookup(e.kid)
	return ok
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[string]cacheEntry)}
}

func (c *tokenCache) get(token string, now time.Time) (cacheEntry, bool) {
	c.mu.RLock()
	e, ok := c.entries[token]
	c.mu.RUnlock()
	if !ok {
		return cacheEntry{}, false
	}
	if !now.Before(e.expires) {
		c.mu.Lock()
		delete(c.entries, token)
		c.mu.Unlock()
		return cacheEntry{}, false
	}
	return e, true
}

func (c *tokenCache) put(token string, e cacheEntry) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		c.entries = make(map[string]cacheEntry, c.max)
	}
	c.entries[token] = e
	c.mu.Unlock()
}
