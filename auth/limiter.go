package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
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
//
// Shared (Share), the count and the block are every instance's: a
// username locked on one is locked on all. While the shared store cannot
// answer, each instance decides with its own count (kept always, so that
// it knows this instance's failures when the store goes away).
type FailureLimiter struct {
	max     int
	window  time.Duration
	maxKeys int
	now     func() time.Time

	shared SharedFailures
	scope  string // starts the shared keys: "user:", "addr:"

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

// SharedFailures shares failed logins between instances (through Redis:
// package limits). A call that fails (no shared store, or it is down)
// leaves the decision to the instance's own count.
type SharedFailures interface {
	// LoginFailed counts a failure (or an attempt) of key, by the rules
	// of FailureLimiter, unless key is blocked: it answers how long key
	// was blocked (0: the failure was counted).
	LoginFailed(ctx context.Context, key string, max int, window, maxBlock time.Duration) (time.Duration, error)
	// LoginBlocked answers how long key is blocked.
	LoginBlocked(ctx context.Context, key string) (time.Duration, error)
	// LoginReset forgets key's failures.
	LoginReset(ctx context.Context, key string) error
}

// Share has l count and block through s, its keys starting with scope
// (one scope per limiter: a username and an address never share a
// count). It returns l.
func (l *FailureLimiter) Share(s SharedFailures, scope string) *FailureLimiter {
	l.shared, l.scope = s, scope
	return l
}

// Blocked returns how long key must still wait, or 0 if it may try.
func (l *FailureLimiter) Blocked(key string) time.Duration {
	if l == nil || l.max <= 0 {
		return 0
	}
	key = limiterKey(key)
	if l.shared != nil {
		if d, err := l.shared.LoginBlocked(context.Background(), l.scope+key); err == nil {
			return d
		}
	}
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
	if l.shared != nil {
		_, _ = l.shared.LoginFailed(context.Background(), l.scope+key, l.max, l.window, maxBlock)
	}
	l.failLocal(key)
}

// Attempt counts an attempt of key before its credential is checked, as
// a failure that a right credential then forgets (Reset): concurrent
// attempts, on one instance or several, cannot all pass a check made
// before any of them failed, so at most max of them per window are let
// through. It answers 0 when this attempt may go on, or how long key is
// blocked (the attempt is then not counted).
func (l *FailureLimiter) Attempt(key string) time.Duration {
	if l == nil || l.max <= 0 {
		return 0
	}
	key = limiterKey(key)
	if l.shared != nil {
		if wait, err := l.shared.LoginFailed(context.Background(), l.scope+key, l.max, l.window, maxBlock); err == nil {
			if wait == 0 {
				l.failLocal(key) // the instance's own view, for an outage
			}
			return wait
		}
	}
	return l.failLocal(key)
}

// failLocal counts a failure in the instance's own map, unless key is
// blocked: it answers how long key was blocked (0: counted).
func (l *FailureLimiter) failLocal(key string) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.keys[key]
	if ok && w.forgotten(now, l.window) {
		ok = false
	}
	if !ok {
		if len(l.keys) >= l.maxKeys && !l.sweep(now) {
			return 0
		}
		w = &failWindow{start: now}
		l.keys[key] = w
	}
	if now.Before(w.until) {
		return w.until.Sub(now) // already blocked: not counted
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
	return 0
}

// Reset forgets key's failures (after a successful login).
func (l *FailureLimiter) Reset(key string) {
	if l == nil {
		return
	}
	key = limiterKey(key)
	if l.shared != nil {
		_ = l.shared.LoginReset(context.Background(), l.scope+key)
	}
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

// AddrNetwork is the network a client address is counted by: an IPv6
// address as its /64 (one subscriber's network: an attacker holds all of
// it, and rotating within it must not reset the count), an IPv4 address
// (or an IPv4-mapped IPv6 one) as itself. What does not parse is kept as
// it is.
func AddrNetwork(addr string) string {
	a, err := netip.ParseAddr(strings.TrimSpace(addr))
	if err != nil {
		return addr
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}
