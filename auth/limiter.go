package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// defaultMaxLimiterKeys bounds the memory of a FailureLimiter.
const defaultMaxLimiterKeys = 100_000

// maxLimiterKeyBytes is the longest key kept verbatim; longer keys (huge
// usernames) are stored as their SHA-256.
const maxLimiterKeyBytes = 128

// FailureLimiter counts failed logins per key (a username, a client
// address): once a key has Max failures within Window of its first one,
// it is blocked for Window; each further lockout doubles the block (up to
// a day) until the key stays quiet for a Window after its last block. A nil
// *FailureLimiter never blocks. It is safe for concurrent use.
type FailureLimiter struct {
	max     int
	window  time.Duration
	maxKeys int
	now     func() time.Time

	mu        sync.Mutex
	keys      map[string]*failWindow
	lastSweep time.Time
}

// failWindow is one key's state: n failures counted since start; after
// strikes lockouts, blocked until until.
type failWindow struct {
	start   time.Time
	n       int
	strikes int
	until   time.Time
}

// maxBlock caps the doubling of lockouts.
const maxBlock = 24 * time.Hour

// forgotten reports whether w has been idle long enough to drop: its count
// window and its last block are a whole window behind.
func (w *failWindow) forgotten(now time.Time, window time.Duration) bool {
	return !now.Before(w.start.Add(window)) && !now.Before(w.until.Add(window))
}

// NewFailureLimiter returns a limiter that blocks a key after max failures
// within window. now may be nil (time.Now).
func NewFailureLimiter(max int, window time.Duration, now func() time.Time) *FailureLimiter {
	return &FailureLimiter{
		max: max, window: window, maxKeys: defaultMaxLimiterKeys,
		now: nowFunc(now), keys: map[string]*failWindow{},
	}
}

// Blocked returns how long key must still wait, or 0 if it may try.
func (l *FailureLimiter) Blocked(key string) time.Duration {
	if l == nil || l.max <= 0 {
		return 0
	}
	key = limiterKey(key)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.keys[key]
	if !ok {
		return 0
	}
	if w.forgotten(now, l.window) {
		delete(l.keys, key)
		return 0
	}
	if now.Before(w.until) {
		return w.until.Sub(now)
	}
	return 0
}

// Fail records a failure for key. When the limiter is full of live keys,
// new keys are not tracked (it fails open rather than grow unbounded).
func (l *FailureLimiter) Fail(key string) {
	if l == nil || l.max <= 0 {
		return
	}
	key = limiterKey(key)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.keys[key]
	if ok && w.forgotten(now, l.window) {
		ok = false
	}
	if !ok {
		if len(l.keys) >= l.maxKeys && !l.sweep(now) {
			return
		}
		w = &failWindow{start: now}
		l.keys[key] = w
	}
	if now.Before(w.until) {
		return // already blocked; Blocked answers before any password check
	}
	if !now.Before(w.start.Add(l.window)) { // a new count window, strikes kept
		w.start, w.n = now, 0
	}
	w.n++
	if w.n >= l.max {
		// Lock out for window, doubled at each lockout since the key was
		// last forgotten.
		block := l.window << min(w.strikes, 20)
		w.strikes++
		w.until, w.start, w.n = now.Add(min(block, maxBlock)), now, 0
	}
}

// Reset forgets key's failures (after a successful login).
func (l *FailureLimiter) Reset(key string) {
	if l == nil {
		return
	}
	key = limiterKey(key)
	l.mu.Lock()
	delete(l.keys, key)
	l.mu.Unlock()
}

// sweep drops ended windows, at most once a second, and reports whether
// there is room for a new key. l.mu is held.
func (l *FailureLimiter) sweep(now time.Time) bool {
	if now.Sub(l.lastSweep) >= time.Second {
		l.lastSweep = now
		for k, w := range l.keys {
			if w.forgotten(now, l.window) {
				delete(l.keys, k)
			}
		}
	}
	return len(l.keys) < l.maxKeys
}

// limiterKey bounds the size of a key.
func limiterKey(key string) string {
	if len(key) <= maxLimiterKeyBytes {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}
