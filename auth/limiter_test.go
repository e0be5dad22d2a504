package auth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFailureLimiter(t *testing.T) {
	now := testNow
	l := NewFailureLimiter(2, time.Minute, func() time.Time { return now })
	type step struct {
		op      string // "fail", "reset", "check"
		key     string
		advance time.Duration
		want    time.Duration // for "check"
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"blocks after max within window", []step{
			{"fail", "a", 0, 0}, {"check", "a", 0, 0},
			{"fail", "a", 10 * time.Second, 0}, {"check", "a", 0, time.Minute},
			{"check", "b", 0, 0},
			{"check", "a", 50 * time.Second, 10 * time.Second},
			{"check", "a", 10 * time.Second, 0},
		}},
		{"window restarts after it ends", []step{
			{"fail", "c", 0, 0}, {"fail", "c", time.Minute, 0}, {"check", "c", 0, 0},
			{"fail", "c", time.Second, 0}, {"check", "c", 0, time.Minute},
		}},
		{"each lockout doubles until the key goes quiet", []step{
			{"fail", "e", 0, 0}, {"fail", "e", 0, 0}, {"check", "e", 0, time.Minute},
			{"fail", "e", time.Minute, 0}, {"fail", "e", 0, 0}, {"check", "e", 0, 2 * time.Minute},
			{"fail", "e", time.Minute, 0}, {"check", "e", 0, time.Minute}, // blocked: not counted
			{"fail", "e", time.Minute, 0}, {"fail", "e", 0, 0}, {"check", "e", 0, 4 * time.Minute},
			{"check", "e", 5 * time.Minute, 0}, // a window after the block: forgotten
			{"fail", "e", 0, 0}, {"fail", "e", 0, 0}, {"check", "e", 0, time.Minute},
		}},
		{"reset forgets", []step{
			{"fail", "d", 0, 0}, {"fail", "d", 0, 0}, {"reset", "d", 0, 0}, {"check", "d", 0, 0},
		}},
		{"long keys are hashed, still counted", []step{
			{"fail", strings.Repeat("k", 10000), 0, 0}, {"fail", strings.Repeat("k", 10000), 0, 0},
			{"check", strings.Repeat("k", 10000), 0, time.Minute},
			{"check", strings.Repeat("k", 9999), 0, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, s := range tt.steps {
				now = now.Add(s.advance)
				switch s.op {
				case "fail":
					l.Fail(s.key)
				case "reset":
					l.Reset(s.key)
				case "check":
					if got := l.Blocked(s.key); got != s.want {
						t.Fatalf("step %d: Blocked = %v, want %v", i, got, s.want)
					}
				}
			}
		})
	}
	for k := range l.keys {
		if len(k) > maxLimiterKeyBytes+len("sha256:")+64 {
			t.Errorf("stored a %d-byte key", len(k))
		}
	}
}

func TestFailureLimiterBounded(t *testing.T) {
	now := testNow
	l := NewFailureLimiter(1, time.Minute, func() time.Time { return now })
	l.maxKeys = 3
	for _, k := range []string{"a", "b", "c", "d"} {
		l.Fail(k)
	}
	if len(l.keys) != 3 || l.Blocked("d") != 0 || l.Blocked("a") == 0 {
		t.Fatalf("full limiter: %d keys, d blocked %v", len(l.keys), l.Blocked("d"))
	}
	// Once windows end, room is made again.
	now = now.Add(2 * time.Minute)
	l.Fail("e")
	if l.Blocked("e") == 0 || len(l.keys) != 1 {
		t.Fatalf("after sweep: %d keys, e blocked %v", len(l.keys), l.Blocked("e"))
	}
}

func TestFailureLimiterNil(t *testing.T) {
	var l *FailureLimiter
	l.Fail("a")
	l.Reset("a")
	if l.Blocked("a") != 0 {
		t.Fatal("nil limiter blocks")
	}
	off := NewFailureLimiter(0, time.Minute, nil)
	off.Fail("a")
	if off.Blocked("a") != 0 {
		t.Fatal("limiter with max 0 blocks")
	}
}

func TestAddrNetwork(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
		{"not an address", "not an address"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := AddrNetwork(tt.addr); got != tt.want {
			t.Errorf("AddrNetwork(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// fakeShared is a SharedFailures that answers from a map, or fails.
type fakeShared struct {
	down    bool
	blocked map[string]time.Duration
	calls   []string
}

func (f *fakeShared) LoginFailed(_ context.Context, key string, max int, window, maxBlock time.Duration) (time.Duration, error) {
	f.calls = append(f.calls, "fail "+key)
	if f.down {
		return 0, errors.New("down")
	}
	return f.blocked[key], nil
}

func (f *fakeShared) LoginBlocked(_ context.Context, key string) (time.Duration, error) {
	f.calls = append(f.calls, "check "+key)
	if f.down {
		return 0, errors.New("down")
	}
	return f.blocked[key], nil
}

func (f *fakeShared) LoginReset(_ context.Context, key string) error {
	f.calls = append(f.calls, "reset "+key)
	if f.down {
		return errors.New("down")
	}
	delete(f.blocked, key)
	return nil
}

// TestFailureLimiterShared: shared, the store's answer decides (another
// instance's lockout blocks here); while it is down, the instance's own
// count does, and it counted every failure all along.
func TestFailureLimiterShared(t *testing.T) {
	now := testNow
	tests := []struct {
		name    string
		down    bool
		remote  time.Duration // the store's block of "alice"
		fails   int           // local failures before the check
		want    time.Duration
		prefix  string
		wantKey string
	}{
		{"another instance's lockout", false, 5 * time.Minute, 0, 5 * time.Minute, "user:", "user:alice"},
		{"the store says free, the local count is ignored", false, 0, 2, 0, "user:", "user:alice"},
		{"store down: the local count decides", true, 5 * time.Minute, 2, time.Minute, "addr:", "addr:alice"},
		{"store down, too few local failures", true, 5 * time.Minute, 1, 0, "user:", "user:alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeShared{down: tt.down, blocked: map[string]time.Duration{tt.wantKey: tt.remote}}
			l := NewFailureLimiter(2, time.Minute, func() time.Time { return now }).Share(f, tt.prefix)
			for range tt.fails {
				l.Fail("alice")
			}
			if got := l.Blocked("alice"); got != tt.want {
				t.Fatalf("Blocked = %v, want %v", got, tt.want)
			}
			for _, c := range f.calls {
				if !strings.HasSuffix(c, " "+tt.wantKey) {
					t.Fatalf("the store was asked %q, want key %q", c, tt.wantKey)
				}
			}
			l.Reset("alice")
			if !tt.down && f.blocked[tt.wantKey] != 0 {
				t.Fatal("Reset did not reach the store")
			}
		})
	}
}

// TestFailureLimiterAttempt: attempts counted before the check let at
// most max through, however many arrive at once; a blocked key's attempt
// is refused and not counted; Reset (a right password) forgets them. With
// a shared store, its answer decides, and the instance counts too.
func TestFailureLimiterAttempt(t *testing.T) {
	now := testNow
	l := NewFailureLimiter(10, time.Minute, func() time.Time { return now })
	var wg sync.WaitGroup
	var through atomic.Int32
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Attempt("alice") == 0 {
				through.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := through.Load(); n != 10 {
		t.Fatalf("%d of 40 attempts at once went through, want 10", n)
	}
	if got := l.Attempt("alice"); got != time.Minute {
		t.Fatalf("blocked attempt: %v", got)
	}
	steps := []struct {
		op   string
		want time.Duration
	}{
		{"attempt", 0}, {"reset", 0}, {"attempt", 0}, {"attempt", 0},
	}
	for i, s := range steps {
		switch s.op {
		case "attempt":
			if got := l.Attempt("bob"); got != s.want {
				t.Fatalf("step %d: %v", i, got)
			}
		case "reset":
			l.Reset("bob")
		}
	}

	f := &fakeShared{blocked: map[string]time.Duration{"user:carol": 3 * time.Minute}}
	sl := NewFailureLimiter(2, time.Minute, func() time.Time { return now }).Share(f, "user:")
	if got := sl.Attempt("carol"); got != 3*time.Minute {
		t.Fatalf("another instance's block: %v", got)
	}
	if got := sl.Attempt("dave"); got != 0 {
		t.Fatalf("a counted attempt: %v", got)
	}
	f.down = true
	sl.Attempt("dave") // the instance counted dave's first attempt too
	if got := sl.Blocked("dave"); got != time.Minute {
		t.Fatalf("store down after two attempts: %v, want the local block", got)
	}
}
