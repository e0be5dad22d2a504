package limits

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// TestLoginLockoutShared: two limiters on one Redis (two instances) count
// a key's failed logins together, by auth.FailureLimiter's rules; without
// Redis, or while it is down, they answer ErrNotShared.
func TestLoginLockoutShared(t *testing.T) {
	srv := redistest.Start(t)
	newL := func() *Limiter {
		l := New(Options{Redis: srv.Client(t), Prefix: "test:"})
		t.Cleanup(l.Close)
		return l
	}
	a, b := newL(), newL()
	ctx := context.Background()
	const window = time.Second
	type step struct {
		on      *Limiter
		op      string // fail, reset, check
		key     string
		sleep   time.Duration
		blocked bool // for fail and check: the answer is a block
		atLeast time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"three failures across two instances lock on both", []step{
			{on: a, op: "fail", key: "u1"}, {on: b, op: "fail", key: "u1"}, {on: a, op: "check", key: "u1"},
			{on: b, op: "fail", key: "u1"}, // counted: the third
			{on: a, op: "check", key: "u1", blocked: true, atLeast: window - 100*time.Millisecond},
			{on: b, op: "check", key: "u1", blocked: true},
			{on: a, op: "fail", key: "u1", blocked: true}, // blocked: not counted
			{on: a, op: "check", key: "other"},
		}},
		{"the block ends after the window", []step{
			{on: a, op: "fail", key: "u2"}, {on: a, op: "fail", key: "u2"}, {on: b, op: "fail", key: "u2"},
			{on: b, op: "check", key: "u2", blocked: true},
			{on: b, op: "check", key: "u2", sleep: window + 50*time.Millisecond},
		}},
		{"a second lockout doubles", []step{
			{on: a, op: "fail", key: "u3"}, {on: a, op: "fail", key: "u3"}, {on: a, op: "fail", key: "u3"},
			{on: b, op: "fail", key: "u3", sleep: window + 50*time.Millisecond},
			{on: b, op: "fail", key: "u3"}, {on: a, op: "fail", key: "u3"},
			{on: a, op: "check", key: "u3", blocked: true, atLeast: 2*window - 100*time.Millisecond},
		}},
		{"a success on one instance forgets on all", []step{
			{on: a, op: "fail", key: "u4"}, {on: a, op: "fail", key: "u4"}, {on: b, op: "reset", key: "u4"},
			{on: a, op: "fail", key: "u4"}, {on: a, op: "check", key: "u4"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, s := range tt.steps {
				time.Sleep(s.sleep)
				var d time.Duration
				var err error
				switch s.op {
				case "fail":
					d, err = s.on.LoginFailed(ctx, s.key, 3, window, time.Hour)
				case "reset":
					err = s.on.LoginReset(ctx, s.key)
				case "check":
					d, err = s.on.LoginBlocked(ctx, s.key)
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if (d > 0) != s.blocked || d < s.atLeast {
					t.Fatalf("step %d (%s %s): blocked %v, want blocked=%v at least %v", i, s.op, s.key, d, s.blocked, s.atLeast)
				}
			}
		})
	}

	t.Run("attempts at once: exactly max counted", func(t *testing.T) {
		var wg sync.WaitGroup
		var counted atomic.Int32
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := a
				if i%2 == 1 {
					l = b
				}
				if d, err := l.LoginFailed(ctx, "u6", 3, time.Minute, time.Hour); err == nil && d == 0 {
					counted.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := counted.Load(); n != 3 {
			t.Fatalf("%d of 40 attempts at once let through, want 3", n)
		}
	})
	t.Run("Redis down: not shared", func(t *testing.T) {
		srv.Kill()
		if _, err := a.LoginFailed(ctx, "u5", 3, window, time.Hour); err == nil {
			t.Fatal("a failure counted in a Redis that is down")
		}
		if _, err := a.LoginBlocked(ctx, "u5"); !errors.Is(err, ErrNotShared) {
			t.Fatalf("after the outage began: %v, want ErrNotShared", err)
		}
	})
	t.Run("no Redis: not shared", func(t *testing.T) {
		l := New(Options{})
		if _, err := l.LoginBlocked(ctx, "u"); !errors.Is(err, ErrNotShared) {
			t.Fatal(err)
		}
	})
}
