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
// address) in fixed windows: once a key has Max failures within Window of
// its first one, it is blocked until that window ends. A nil
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

// failWindow is one key's current window.
type failWindow struct {
	start time.Time
	n     int
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
	end := w.start.Add(l.window)
	if !now.Before(end) {
		delete(l.keys, key)
		return 0
	}
	if w.n < l.max {
		return 0
	}
	return end.Sub(now)
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
	if ok && !now.Before(w.start.Add(l.window)) {
		ok = false
	}
	if !ok {
		if len(l.keys) >= l.maxKeys && !l.sweep(now) {
			return
		}
		w = &failWindow{start: now}
		l.keys[key] = w
	}
	w.n++
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
			if !now.Before(w.start.Add(l.window)) {
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
