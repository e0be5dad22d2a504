package auth

import (
	"strings"
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
