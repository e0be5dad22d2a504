// Package revocation keeps the set of revoked access tokens that every
// gateway instance checks: per user a cutoff (every token issued to the
// user before it is refused), and single tokens by their jti (kept until
// they expire). A Sync shares it between instances through a Backend —
// Redis (a stored hash and sorted set, changes pushed by pub/sub and
// caught up by a version counter) or Caddy's storage (one JSON document,
// polled) — and a List answers the request path from memory.
package revocation

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// State is the revoked set as stored and exchanged: unix seconds.
type State struct {
	// Users maps a user to its cutoff: tokens issued (iat) before it are
	// revoked.
	Users map[string]int64 `json:"users"`
	// Tokens maps a token's jti to its expiry, after which the entry is
	// useless and pruned.
	Tokens map[string]int64 `json:"tokens"`
}

// Entry is one revocation.
type Entry struct {
	// User, when set, revokes every token issued to this user before
	// Before.
	User   string
	Before time.Time
	// JTI, when set, revokes that token; Expires is its expiry.
	JTI     string
	Expires time.Time
}

// Cutoff is the user cutoff of a revocation made at t: the next whole
// second. Tokens carry iat in whole seconds, so a token issued in the same
// second as the revocation cannot be told from one issued just before it;
// both are refused.
func Cutoff(t time.Time) time.Time {
	c := t.Truncate(time.Second)
	if c.Before(t) {
		c = c.Add(time.Second)
	}
	return c
}

// add merges e into s: the later cutoff wins.
func (s *State) add(e Entry) {
	if e.User != "" {
		if s.Users == nil {
			s.Users = map[string]int64{}
		}
		if c := e.Before.Unix(); c > s.Users[e.User] {
			s.Users[e.User] = c
		}
	}
	if e.JTI != "" {
		if s.Tokens == nil {
			s.Tokens = map[string]int64{}
		}
		if x := e.Expires.Unix(); x > s.Tokens[e.JTI] {
			s.Tokens[e.JTI] = x
		}
	}
}

// merge adds every entry of o to s.
func (s *State) merge(o State) {
	for u, c := range o.Users {
		s.add(Entry{User: u, Before: time.Unix(c, 0)})
	}
	for j, x := range o.Tokens {
		s.add(Entry{JTI: j, Expires: time.Unix(x, 0)})
	}
}

// Prune drops the entries that can no longer refuse anything: tokens past
// their expiry, user cutoffs older than the longest token lifetime.
func (s *State) Prune(now time.Time, maxLifetime time.Duration) {
	for j, x := range s.Tokens {
		if x < now.Unix() {
			delete(s.Tokens, j)
		}
	}
	for u, c := range s.Users {
		if time.Unix(c, 0).Add(maxLifetime).Before(now) {
			delete(s.Users, u)
		}
	}
}

func (s State) clone() State {
	c := State{Users: make(map[string]int64, len(s.Users)), Tokens: make(map[string]int64, len(s.Tokens))}
	for k, v := range s.Users {
		c.Users[k] = v
	}
	for k, v := range s.Tokens {
		c.Tokens[k] = v
	}
	return c
}

// List answers "is this token revoked?" from memory. The zero List is
// empty and ready.
type List struct {
	mu   sync.Mutex // serialises writers
	snap atomic.Pointer[State]
}

// Revoked reports whether a token of user, with id jti, issued at iat, is
// revoked. It takes no lock and allocates nothing.
func (l *List) Revoked(user, jti string, iat time.Time) bool {
	s := l.snap.Load()
	if s == nil {
		return false
	}
	if c, ok := s.Users[user]; ok && iat.Unix() < c {
		return true
	}
	if jti != "" {
		if _, ok := s.Tokens[jti]; ok {
			return true
		}
	}
	return false
}

// Add records e in this instance at once.
func (l *List) Add(e Entry) {
	l.update(func(s *State) { s.add(e) })
}

// Merge adds every entry of o (a backend's stored state, which only
// grows but for pruning): nothing revoked here is forgotten because a
// backend has not heard of it yet.
func (l *List) Merge(o State, now time.Time, maxLifetime time.Duration) {
	l.update(func(s *State) {
		s.merge(o)
		s.Prune(now, maxLifetime)
	})
}

func (l *List) update(f func(*State)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var next State
	if cur := l.snap.Load(); cur != nil {
		next = cur.clone()
	} else {
		next = State{Users: map[string]int64{}, Tokens: map[string]int64{}}
	}
	f(&next)
	l.snap.Store(&next)
}

// Snapshot is a copy of the current state.
func (l *List) Snapshot() State {
	if s := l.snap.Load(); s != nil {
		return s.clone()
	}
	return State{Users: map[string]int64{}, Tokens: map[string]int64{}}
}

// Backend shares revocations between instances.
type Backend interface {
	// Add stores e durably and lets the other instances know.
	Add(ctx context.Context, e Entry) error
	// Load returns the stored state.
	Load(ctx context.Context) (State, error)
	// Watch calls apply with each revocation another instance announces,
	// and changed when the stored state may have changed without an
	// announcement (a missed message); it returns when ctx ends. A
	// backend without announcements returns at once.
	Watch(ctx context.Context, apply func(Entry), changed func())
}

// Options configure a Sync.
type Options struct {
	// Poll is how often the stored state is read again, for what the
	// announcements missed (or, without them, for everything). Default 1s.
	Poll time.Duration
	// MaxLifetime is the longest a token lives (its TTL plus the
	// verifier's leeway): user cutoffs older than that are pruned.
	MaxLifetime time.Duration
	// Timeout bounds each backend call. Default 2s.
	Timeout time.Duration
	// OnError hears backend failures (op: load, add).
	OnError func(op string, err error)
}

// Sync keeps a List in step with a Backend.
type Sync struct {
	List    *List
	backend Backend
	o       Options
	kick    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewSync returns a Sync of list with backend; Start runs it.
func NewSync(list *List, backend Backend, o Options) *Sync {
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = 24 * time.Hour
	}
	return &Sync{List: list, backend: backend, o: o, kick: make(chan struct{}, 1)}
}

// Load reads the stored state once, for a new instance or configuration
// before it serves.
func (s *Sync) Load(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	st, err := s.backend.Load(ctx)
	if err != nil {
		s.failed("load", err)
		return err
	}
	s.List.Merge(st, time.Now(), s.o.MaxLifetime)
	return nil
}

// Revoke applies e here at once, then stores and announces it. An error
// means the other instances may not know (this one does).
func (s *Sync) Revoke(ctx context.Context, e Entry) error {
	if e.User == "" && e.JTI == "" {
		return errors.New("revocation: neither a user nor a token")
	}
	s.List.Add(e)
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	if err := s.backend.Add(ctx, e); err != nil {
		s.failed("add", err)
		return err
	}
	return nil
}

func (s *Sync) failed(op string, err error) {
	if s.o.OnError != nil {
		s.o.OnError(op, err)
	}
}

// Start follows the backend until Stop.
func (s *Sync) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.backend.Watch(ctx, s.List.Add, func() {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		})
	}()
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.o.Poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-s.kick:
			}
			_ = s.Load(ctx)
		}
	}()
}

// Stop ends Start's work and waits for it.
func (s *Sync) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// MemoryBackend keeps the state in this process only: revocations reach
// no other instance. For tests, and as the model of the others.
type MemoryBackend struct {
	mu sync.Mutex
	st State
}

// Add implements Backend.
func (m *MemoryBackend) Add(_ context.Context, e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.add(e)
	return nil
}

// Load implements Backend.
func (m *MemoryBackend) Load(context.Context) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.clone(), nil
}

// Watch implements Backend: nothing is announced.
func (m *MemoryBackend) Watch(context.Context, func(Entry), func()) {}

// unixSeconds turns a stored score into seconds, tolerating floats.
func unixSeconds(f float64) int64 { return int64(math.Round(f)) }
