package limits

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

func TestGCRA(t *testing.T) {
	const now = 1e12
	tests := []struct {
		name         string
		tat          float64
		limit, cost  int
		ok           bool
		next, retry  float64
		remainingNow int
	}{
		{name: "full bucket, one request", tat: 0, limit: 60, cost: 1, ok: true, next: now + 1e6, remainingNow: 60},
		{name: "full bucket, a minute's worth at once", tat: 0, limit: 60, cost: 60, ok: true, next: now + 60e6, remainingNow: 60},
		{name: "empty bucket refuses, retry in one interval", tat: now + 60e6, limit: 60, cost: 1, ok: false, retry: 1e6, remainingNow: 0},
		{name: "half full", tat: now + 30e6, limit: 60, cost: 30, ok: true, next: now + 60e6, remainingNow: 30},
		{name: "too large for what is left", tat: now + 30e6, limit: 60, cost: 31, ok: false, retry: 1e6, remainingNow: 30},
		{name: "uneven interval: 7 per minute", tat: now + 6*60e6/7, limit: 7, cost: 1, ok: true, next: now + 60e6, remainingNow: 1},
		{name: "tokens", tat: 0, limit: 100000, cost: 1500, ok: true, next: now + 1500*600, remainingNow: 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rem, _ := gcraQuota(tt.tat, now, tt.limit)
			if rem != tt.remainingNow {
				t.Errorf("remaining before = %d, want %d", rem, tt.remainingNow)
			}
			next, ok, retry := gcraCharge(tt.tat, now, tt.limit, tt.cost)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && !near(next, tt.next) {
				t.Errorf("next = %.0f, want %.0f", next, tt.next)
			}
			if !ok && !near(retry, tt.retry) {
				t.Errorf("retry = %.0f, want %.0f", retry, tt.retry)
			}
		})
	}
}

func TestGCRAAdjust(t *testing.T) {
	const now = 1e12
	tests := []struct {
		name        string
		tat         float64
		delta       int
		want        float64
		limit       int
		wantExact   bool
		wantAtLeast float64
	}{
		{name: "refund", tat: now + 10e6, limit: 60, delta: -5, want: now + 5e6},
		{name: "refund never below now", tat: now + 1e6, limit: 60, delta: -5, want: now},
		{name: "extra charge on a full bucket starts from now", tat: 0, limit: 60, delta: 2, want: now + 2e6},
		{name: "extra charge", tat: now + 1e6, limit: 60, delta: 2, want: now + 3e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gcraAdjust(tt.tat, now, tt.limit, tt.delta); !near(got, tt.want) {
				t.Errorf("got %.0f, want %.0f", got, tt.want)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 2 && b-a < 2 }

// store runs the behaviour tests against the per-instance state and
// against Redis.
type store struct {
	name string
	new  func(t *testing.T) *Limiter
}

func stores(t *testing.T) []store {
	return []store{
		{"local", func(t *testing.T) *Limiter { return startLimiter(t, Options{}) }},
		{"redis", func(t *testing.T) *Limiter {
			srv := redistest.Start(t)
			return startLimiter(t, Options{Redis: srv.Client(t), Prefix: "test:"})
		}},
	}
}

func startLimiter(t *testing.T, o Options) *Limiter {
	l := New(o)
	l.Start()
	t.Cleanup(l.Close)
	return l
}

func user(name string, l Limit) Bucket { return Bucket{Key: UserKey(name), Scope: ScopeUser, Limit: l} }

func TestRequestsPerMinute(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			l := s.new(t)
			req := &Request{Buckets: []Bucket{user("alice", Limit{RPM: 10})}}
			for i := 0; i < 10; i++ {
				tk, d := l.Admit(context.Background(), req)
				if !d.Allowed {
					t.Fatalf("request %d refused: %+v", i+1, d)
				}
				if d.Requests.Limit != 10 || d.Requests.Remaining != 9-i {
					t.Errorf("request %d: quota %+v, want limit 10 remaining %d", i+1, d.Requests, 9-i)
				}
				tk.Settle(0)
			}
			tk, d := l.Admit(context.Background(), req)
			if d.Allowed || tk != nil {
				t.Fatal("the 11th request of a 10 rpm bucket passed")
			}
			if d.Refused != KindRequests || d.Bucket != 0 {
				t.Errorf("refused by %v bucket %d, want rpm bucket 0", d.Refused, d.Bucket)
			}
			// One request refills every 6 s.
			if d.RetryAfter <= 5*time.Second || d.RetryAfter > 6*time.Second {
				t.Errorf("retry after %v, want about 6s", d.RetryAfter)
			}
			// Another user is not affected.
			if _, d := l.Admit(context.Background(), &Request{Buckets: []Bucket{user("bob", Limit{RPM: 10})}}); !d.Allowed {
				t.Error("bob refused for alice's requests")
			}
		})
	}
}

func TestTokensReservedThenSettled(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			l := s.new(t)
			b := user("alice", Limit{TPM: 1000})
			req := &Request{Buckets: []Bucket{b}, Tokens: 400}
			t1, d := l.Admit(context.Background(), req)
			if !d.Allowed || d.Tokens.Remaining != 600 {
				t.Fatalf("first: %+v", d)
			}
			t2, d := l.Admit(context.Background(), req)
			if !d.Allowed || d.Tokens.Remaining != 200 {
				t.Fatalf("second: %+v", d)
			}
			// 800 reserved: a third reservation of 400 does not fit.
			if _, d := l.Admit(context.Background(), req); d.Allowed || d.Refused != KindTokens {
				t.Fatalf("third passed with 800 of 1000 reserved: %+v", d)
			}
			// The first used 100: 300 come back, and the third fits.
			t1.Settle(100)
			t1.Settle(0) // a second settlement does nothing
			_, tokens, err := l.Load(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			if tokens < 495 || tokens > 500 {
				t.Errorf("charged after settling: %.1f tokens, want about 500", tokens)
			}
			t3, d := l.Admit(context.Background(), req)
			if !d.Allowed {
				t.Fatalf("third refused after the refund: %+v", d)
			}
			// A request that used more than it reserved is charged for it.
			t2.Settle(900)
			_, tokens, _ = l.Load(context.Background(), b)
			if tokens < 1390 || tokens > 1400 {
				t.Errorf("charged after an overrun: %.1f tokens, want about 1400", tokens)
			}
			t3.Settle(-1) // unknown usage keeps the reservation
			if _, tokens2, _ := l.Load(context.Background(), b); tokens2 < tokens-5 {
				t.Errorf("an unknown usage refunded: %.1f → %.1f", tokens, tokens2)
			}
		})
	}
}

func TestReservationCappedAtTheLimit(t *testing.T) {
	l := startLimiter(t, Options{})
	// A request larger than a minute's allowance passes on a full bucket.
	tk, d := l.Admit(context.Background(), &Request{Buckets: []Bucket{user("a", Limit{TPM: 100})}, Tokens: 5000})
	if !d.Allowed {
		t.Fatalf("refused: %+v", d)
	}
	tk.Settle(50)
}

func TestConcurrency(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			l := s.new(t)
			req := &Request{Buckets: []Bucket{user("alice", Limit{Concurrency: 2})}}
			a, d1 := l.Admit(context.Background(), req)
			b, d2 := l.Admit(context.Background(), req)
			if !d1.Allowed || !d2.Allowed {
				t.Fatal("refused below the limit")
			}
			if _, d := l.Admit(context.Background(), req); d.Allowed || d.Refused != KindConcurrency || d.RetryAfter <= 0 {
				t.Fatalf("third in flight: %+v", d)
			}
			a.Settle(0)
			c, d := l.Admit(context.Background(), req)
			if !d.Allowed {
				t.Fatal("refused after a slot freed")
			}
			b.Settle(0)
			c.Settle(0)
			if n, _, _ := l.Load(context.Background(), req.Buckets[0]); n != 0 {
				t.Errorf("%d in flight after every settlement", n)
			}
		})
	}
}

// A refusal by one bucket charges none of the others.
func TestAllOrNothing(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			l := s.new(t)
			u := user("alice", Limit{RPM: 100, TPM: 10000, Concurrency: 10})
			m := Bucket{Key: ModelKey("qwen", "alice"), Scope: ScopeModel, Limit: Limit{RPM: 1}}
			if _, d := l.Admit(context.Background(), &Request{Buckets: []Bucket{u, m}, Tokens: 10}); !d.Allowed {
				t.Fatalf("first refused: %+v", d)
			}
			for i := 0; i < 5; i++ {
				_, d := l.Admit(context.Background(), &Request{Buckets: []Bucket{u, m}, Tokens: 10})
				if d.Allowed || d.Refused != KindRequests || d.Bucket != 1 {
					t.Fatalf("want a refusal by the model bucket: %+v", d)
				}
				if d.Requests.Remaining != 0 {
					t.Errorf("requests quota %+v: want the tightest bucket (0 left)", d.Requests)
				}
			}
			n, tokens, _ := l.Load(context.Background(), u)
			if n != 1 || tokens > 10 {
				t.Errorf("user bucket charged by refusals: %d in flight, %.0f tokens", n, tokens)
			}
			_, d := l.Admit(context.Background(), &Request{Buckets: []Bucket{u}})
			if d.Requests.Remaining != 98 {
				t.Errorf("user bucket has %d requests left, want 98", d.Requests.Remaining)
			}
		})
	}
}

// Several limiters on one Redis share their limits exactly, even when
// they all admit at once.
func TestSharedAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	const instances, per, limit = 4, 50, 60
	var ls []*Limiter
	for i := 0; i < instances; i++ {
		// A generous timeout: 200 admissions at once on a loaded machine
		// (the race detector, CI) may take more than the default 250 ms,
		// and a timed-out call is decided by the instance alone: that
		// fallback is tested elsewhere, the sharing is tested here.
		ls = append(ls, startLimiter(t, Options{Redis: srv.Client(t), Prefix: "shared:", Timeout: 10 * time.Second,
			OnRedisError: func(op string) { t.Errorf("redis call failed: %s", op) }}))
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, l := range ls {
		for j := 0; j < per; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if tk, d := l.Admit(context.Background(), &Request{Buckets: []Bucket{user("alice", Limit{RPM: limit})}}); d.Allowed {
					admitted.Add(1)
					tk.Settle(0)
				}
			}()
		}
	}
	wg.Wait()
	// A full bucket holds 60; a request refills every second, so a slow
	// run may admit one or two more.
	if n := admitted.Load(); n < limit || n > limit+2 {
		t.Errorf("%d instances admitted %d of %d requests against %d rpm", instances, n, instances*per, limit)
	}
}

// A crashed instance's concurrency slots expire after the lease.
func TestSlotsOfACrashedInstanceExpire(t *testing.T) {
	srv := redistest.Start(t)
	crashed := New(Options{Redis: srv.Client(t), Prefix: "lease:", Lease: 300 * time.Millisecond})
	req := &Request{Buckets: []Bucket{user("alice", Limit{Concurrency: 1})}}
	if _, d := crashed.Admit(context.Background(), req); !d.Allowed {
		t.Fatal(d)
	}
	// Never started, never settled: as if the process died.
	l := startLimiter(t, Options{Redis: srv.Client(t), Prefix: "lease:", Lease: 300 * time.Millisecond})
	if _, d := l.Admit(context.Background(), req); d.Allowed {
		t.Fatal("a second request passed a concurrency of 1")
	}
	waitFor(t, 5*time.Second, func() bool {
		tk, d := l.Admit(context.Background(), req)
		tk.Settle(0)
		return d.Allowed
	})
	// While a live instance refreshes its slot, it does not expire.
	tk, d := l.Admit(context.Background(), req)
	if !d.Allowed {
		t.Fatal(d)
	}
	time.Sleep(time.Second) // > 3 leases
	if _, d := l.Admit(context.Background(), req); d.Allowed {
		t.Error("a refreshed slot expired")
	}
	tk.Settle(0)
}

// Redis dying mid-run: open mode falls back to the per-instance limits,
// with no error and no wait; the settlements Redis missed are applied when
// it is back, and the limiter uses Redis again by itself.
func TestRedisFailureOpen(t *testing.T) {
	srv := redistest.Start(t)
	var states []bool
	var mu sync.Mutex
	l := startLimiter(t, Options{Redis: srv.Client(t), Prefix: "fail:", Timeout: 100 * time.Millisecond,
		OnRedisState: func(up bool, _ error) { mu.Lock(); states = append(states, up); mu.Unlock() }})
	b := user("alice", Limit{RPM: 1000, TPM: 100000, Concurrency: 5})
	req := &Request{Buckets: []Bucket{b}, Tokens: 1000}
	held, d := l.Admit(context.Background(), req)
	if !d.Allowed || d.Fallback {
		t.Fatalf("before the failure: %+v", d)
	}
	srv.Kill()
	start := time.Now()
	for i := 0; i < 20; i++ {
		tk, d := l.Admit(context.Background(), req)
		if !d.Allowed || (i > 0 && !d.Fallback) {
			t.Fatalf("request %d while Redis is down: %+v", i, d)
		}
		tk.Settle(10)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("20 admissions took %v with Redis down: the timeout is not short", el)
	}
	if l.RedisUp() {
		t.Error("still says Redis is up")
	}
	held.Settle(10) // Redis' ticket, settled while it is down: kept
	if l.Pending() != 1 {
		t.Errorf("%d settlements pending, want 1", l.Pending())
	}
	srv.Restart(t)
	waitFor(t, 10*time.Second, l.RedisUp)
	waitFor(t, 5*time.Second, func() bool { return l.Pending() == 0 })
	if _, d := l.Admit(context.Background(), req); !d.Allowed || d.Fallback {
		t.Fatalf("after Redis came back: %+v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 2 || states[0] || !states[1] {
		t.Errorf("state changes %v, want [down up]", states)
	}
}

func TestRedisFailureClosed(t *testing.T) {
	srv := redistest.Start(t)
	l := startLimiter(t, Options{Redis: srv.Client(t), Prefix: "closed:", FailClosed: true, Timeout: 100 * time.Millisecond})
	req := &Request{Buckets: []Bucket{user("alice", Limit{RPM: 1000})}}
	srv.Kill()
	for i := 0; i < 3; i++ {
		if tk, d := l.Admit(context.Background(), req); d.Allowed || tk != nil || !IsUnavailable(d) || d.RetryAfter <= 0 {
			t.Fatalf("closed mode admitted with Redis down: %+v", d)
		}
	}
	srv.Restart(t)
	waitFor(t, 10*time.Second, func() bool { _, d := l.Admit(context.Background(), req); return d.Allowed })
}

func TestLocalSweepForgetsIdleBuckets(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l := New(Options{Now: clock})
	tk, _ := l.Admit(context.Background(), &Request{Buckets: []Bucket{user("a", Limit{RPM: 60, Concurrency: 1})}})
	l.local.sweep()
	if l.local.len() != 1 {
		t.Fatal("swept a bucket in use")
	}
	tk.Settle(0)
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	l.local.sweep()
	if l.local.len() != 0 {
		t.Error("an idle, full bucket was kept")
	}
}

func TestLimitOverAndValidate(t *testing.T) {
	base := Limit{RPM: 60, TPM: 1000, Concurrency: 4}
	tests := []struct {
		name string
		l    Limit
		want Limit
	}{
		{"unset inherits", Limit{}, base},
		{"override one field", Limit{RPM: 10}, Limit{RPM: 10, TPM: 1000, Concurrency: 4}},
		{"off overrides", Limit{TPM: Off}, Limit{RPM: 60, TPM: Off, Concurrency: 4}},
	}
	for _, tt := range tests {
		if got := tt.l.Over(base); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if (Limit{TPM: Off, RPM: Off}).Enforced() {
		t.Error("all off is enforced")
	}
	if (Limit{RPM: -2}).Validate() == nil {
		t.Error("-2 validated")
	}
}

func TestBucketKeysDoNotCollide(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range []string{UserKey("a:b"), ModelKey("a", "b"), ModelKey("a:b", ""), ModelKey("", "a:b"), KeyKey("a:b"), UserKey("k:a")} {
		if keys[k] {
			t.Errorf("key %q twice", k)
		}
		keys[k] = true
	}
}

func TestEstimateTokens(t *testing.T) {
	if got := EstimateTokens(0, 0); got != 3 {
		t.Errorf("empty: %d", got)
	}
	// "Hello there, how are you?" is 7 tokens for most tokenizers; the
	// estimate errs high.
	if got := EstimateTokens(len("Hello there, how are you?"), 1); got < 7+4 || got > 25 {
		t.Errorf("one short message: %d", got)
	}
}

func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
