package status

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for a Recorder.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestRecorder starts a recorder at a bucket boundary, an hour after
// its clock's start (so that uptime never bounds the rates).
func newTestRecorder() (*Recorder, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0).Truncate(BucketWidth)}
	rec := &Recorder{start: c.t.Add(-time.Hour), now: c.now}
	return rec, c
}

func TestBins(t *testing.T) {
	prev := -1
	for us := uint64(0); us < 1<<22; us = us*17/16 + 1 {
		b := binOf(us)
		if b < prev {
			t.Fatalf("bin of %d µs is %d, below the previous %d", us, b, prev)
		}
		prev = b
		lo, hi := binBounds(b)
		if float64(us) < lo || float64(us) >= hi {
			t.Fatalf("%d µs in bin %d [%v, %v)", us, b, lo, hi)
		}
		if us >= subBins && (hi-lo)/lo > 1.0/subBins+1e-9 {
			t.Fatalf("bin %d [%v, %v) is wider than 1/%d of its start", b, lo, hi, subBins)
		}
	}
	if got := binOf(math.MaxUint64); got != latencyBins-1 {
		t.Fatalf("the largest value is in bin %d, want the last (%d)", got, latencyBins-1)
	}
}

func TestQuantiles(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		values   []time.Duration
		p50, p90 time.Duration
	}{
		{"constant", repeat(100, 250*ms), 250 * ms, 250 * ms},
		{"uniform 1..1000 ms", ramp(1000, ms), 500 * ms, 900 * ms},
		{"a slow tenth", append(repeat(90, 20*ms), repeat(10, 4*time.Second)...), 20 * ms, 20 * ms},
		{"a slow fifth", append(repeat(80, 20*ms), repeat(20, 4*time.Second)...), 20 * ms, 4 * time.Second},
		{"sub-millisecond", repeat(10, 3*time.Microsecond), 3 * time.Microsecond, 3 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			for _, v := range tc.values {
				h.add(v)
			}
			for _, q := range []struct {
				q    float64
				want time.Duration
			}{{0.5, tc.p50}, {0.9, tc.p90}} {
				got, ok := h.quantile(q.q)
				if !ok {
					t.Fatal("no quantile from a filled histogram")
				}
				// Half a bin at most, plus a microsecond for the smallest.
				if want := q.want.Seconds(); math.Abs(got-want) > want/subBins+1e-6 {
					t.Errorf("q%.0f = %v s, want %v s", 100*q.q, got, want)
				}
			}
		})
	}
	var empty histogram
	if _, ok := empty.quantile(0.5); ok {
		t.Fatal("an empty histogram has a quantile")
	}
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func ramp(n int, step time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * step
	}
	return out
}

func TestRates(t *testing.T) {
	for _, tc := range []struct {
		name string
		// per bucket, oldest first, each at its bucket's start: requests
		// with these statuses
		buckets [][]int
		// elapsed within the last bucket when the snapshot is taken
		into                 time.Duration
		rps, errors, refused float64
	}{
		{"idle", nil, 0, 0, 0, 0},
		{"one full minute", [][]int{{200}, {200}, {200}, {200}, {200}, {200, 200, 200, 200, 500, 429}}, BucketWidth - time.Nanosecond,
			11.0 / 60, 1.0 / 60, 1.0 / 60},
		{"half a bucket in", [][]int{{200, 200}, {200}, {200}, {200}, {200}, {502}}, BucketWidth / 2,
			7.0 / 55, 1.0 / 55, 0},
		{"older than the rate window", [][]int{{200, 200, 200}, {}, {}, {}, {}, {}, {200}}, BucketWidth - time.Nanosecond,
			1.0 / 60, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, c := newTestRecorder()
			for i, statuses := range tc.buckets {
				if i > 0 {
					c.add(BucketWidth)
				}
				for _, st := range statuses {
					rec.Record(Request{Model: "qwen", Status: st})
				}
			}
			c.add(tc.into)
			m := rec.Snapshot([]Model{{Name: "qwen"}}).Models[0]
			for _, f := range []struct {
				name      string
				got, want float64
			}{{"requests", m.RequestsPerSecond, tc.rps}, {"errors", m.ErrorsPerSecond, tc.errors}, {"refused", m.RefusedPerSecond, tc.refused}} {
				if math.Abs(f.got-f.want) > 1e-6 {
					t.Errorf("%s per second = %v, want %v", f.name, f.got, f.want)
				}
			}
		})
	}
}

func TestUptimeBoundsRates(t *testing.T) {
	rec, c := newTestRecorder()
	rec.start = c.now().Add(-2 * time.Second)
	for range 4 {
		rec.Record(Request{Model: "qwen", Status: 200})
	}
	if got := rec.Snapshot([]Model{{Name: "qwen"}}).Models[0].RequestsPerSecond; got != 2 {
		t.Fatalf("4 requests in the first 2 s of the process: %v per second, want 2", got)
	}
}

func TestWindowForgets(t *testing.T) {
	rec, c := newTestRecorder()
	rec.Record(Request{Model: "qwen", Status: 200, TTFT: 3 * time.Second, User: "old", Tokens: 5})
	c.add(Window - BucketWidth)
	rec.Record(Request{Model: "qwen", Status: 200, TTFT: 100 * time.Millisecond, User: "new", Tokens: 7})
	s := rec.Snapshot([]Model{{Name: "qwen"}})
	if m := s.Models[0]; m.TTFT.Samples != 2 || *m.TTFT.P90 < 1 {
		t.Fatalf("within the window: %d samples, p90 %v; want both", m.TTFT.Samples, *m.TTFT.P90)
	}
	if len(s.Tenants.TopTokens) != 2 {
		t.Fatalf("within the window: users %+v, want both", s.Tenants.TopTokens)
	}
	// Two buckets on, the first one is out of the window, and reused.
	c.add(2 * BucketWidth)
	rec.Record(Request{Model: "qwen", Status: 200, TTFT: 100 * time.Millisecond, User: "new"})
	s = rec.Snapshot([]Model{{Name: "qwen"}})
	if m := s.Models[0]; m.TTFT.Samples != 2 || *m.TTFT.P90 > 1 {
		t.Fatalf("after the window: %d samples, p90 %v s; want the recent two, fast", m.TTFT.Samples, *m.TTFT.P90)
	}
	if u := s.Tenants.TopTokens; len(u) != 1 || u[0].User != "new" || u[0].Tokens != 7 || u[0].Requests != 2 {
		t.Fatalf("after the window: users %+v, want new alone with 7 tokens in 2 requests", u)
	}
}

func TestUnknownModelAndNoSamples(t *testing.T) {
	rec, _ := newTestRecorder()
	s := rec.Snapshot([]Model{{Name: "gemma"}})
	m := s.Models[0]
	if m.RequestsPerSecond != 0 || m.TTFT.P50 != nil || m.TTFT.P90 != nil || m.TTFT.Samples != 0 {
		t.Fatalf("a model without requests: %+v", m)
	}
	if s.Tenants.TopTokens == nil || s.Tenants.Refused == nil {
		t.Fatal("empty tenant lists must be [] in JSON, not null")
	}
}

func TestRefusalOf(t *testing.T) {
	for _, tc := range []struct {
		status int
		routed bool
		want   string
	}{
		{200, true, ""},
		{403, false, RefusalScope},
		{429, false, RefusalLimit},
		{429, true, RefusalBusy},
		{401, false, ""},
		{503, true, ""},
	} {
		if got := RefusalOf(tc.status, tc.routed); got != tc.want {
			t.Errorf("RefusalOf(%d, routed %v) = %q, want %q", tc.status, tc.routed, got, tc.want)
		}
	}
}

func TestUsers(t *testing.T) {
	rec, _ := newTestRecorder()
	for _, r := range []Request{
		{User: "ann", Model: "qwen", Status: 200, Tokens: 100},
		{User: "ann", Model: "qwen", Status: 200, Tokens: 50},
		{User: "bob", Model: "qwen", Status: 200, Tokens: 400},
		{User: "bob", Model: "qwen", Status: 502},
		{User: "cy", Status: 429, Refusal: RefusalLimit},
		{User: "cy", Status: 429, Refusal: RefusalLimit},
		{User: "cy", Model: "gemma", Status: 403, Refusal: RefusalScope},
		{User: "dee", Model: "qwen", Status: 429, Refusal: RefusalBusy},
		{User: "dee", Model: "qwen", Status: 200, Tokens: 1},
		{Model: "qwen", Status: 401}, // nobody
	} {
		rec.Record(r)
	}
	s := rec.Snapshot(nil)
	var top, refused []string
	for _, u := range s.Tenants.TopTokens {
		top = append(top, fmt.Sprintf("%s:%d/%d", u.User, u.Tokens, u.Requests))
	}
	for _, u := range s.Tenants.Refused {
		refused = append(refused, fmt.Sprintf("%s:%d=%d+%d+%d", u.User, u.Refused, u.Limit, u.Busy, u.Scope))
	}
	if got, want := fmt.Sprint(top), "[bob:400/2 ann:150/2 dee:1/2]"; got != want {
		t.Errorf("top by tokens %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(refused), "[cy:3=2+0+1 dee:1=0+1+0]"; got != want {
		t.Errorf("refused %s, want %s", got, want)
	}
	if s.Tenants.TopTokens[0].Errors != 1 {
		t.Errorf("bob's errors: %d, want 1", s.Tenants.TopTokens[0].Errors)
	}
}

func TestUsersBounded(t *testing.T) {
	rec, _ := newTestRecorder()
	for i := range MaxUsersPerBucket + 5 {
		rec.Record(Request{User: fmt.Sprintf("u%05d", i), Status: 200, Tokens: 1})
	}
	rec.Record(Request{User: "u00000", Status: 200, Tokens: 1000}) // known: still counted as itself
	top := rec.Snapshot(nil).Tenants.TopTokens
	if top[0].User != "u00000" || top[0].Tokens != 1001 {
		t.Fatalf("top user %+v, want u00000 with 1001 tokens", top[0])
	}
	if top[1].User != OtherUsers || top[1].Requests != 5 {
		t.Fatalf("second %+v, want %s with the 5 users beyond the bound", top[1], OtherUsers)
	}
}

// TestConcurrentRecord records from many goroutines across bucket
// boundaries while snapshots are taken (run with -race): every request is
// counted once.
func TestConcurrentRecord(t *testing.T) {
	rec, c := newTestRecorder()
	const workers, each = TopUsers, 3000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec.Record(Request{Model: "qwen", User: fmt.Sprint("u", w), Status: 200, TTFT: time.Millisecond, Tokens: 1})
				if w == 0 && i%500 == 0 {
					c.add(BucketWidth / 2)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			_ = rec.Snapshot([]Model{{Name: "qwen"}})
		}
	}()
	wg.Wait()
	<-done
	s := rec.Snapshot([]Model{{Name: "qwen"}})
	if got := s.Models[0].TTFT.Samples; got != workers*each {
		t.Fatalf("%d samples, want %d", got, workers*each)
	}
	var tokens uint64
	for _, u := range s.Tenants.TopTokens {
		tokens += u.Tokens
	}
	if tokens != workers*each || len(s.Tenants.TopTokens) != TopUsers {
		t.Fatalf("%d tokens over %d users, want %d over the top %d", tokens, len(s.Tenants.TopTokens), workers*each, TopUsers)
	}
}

// BenchmarkRecord is the request path's cost: one Record per answered
// request, from every core at once, for one model and a few users.
func BenchmarkRecord(b *testing.B) {
	rec := NewRecorder()
	users := []string{"ann", "bob", "cy", "dee"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			rec.Record(Request{Model: "qwen", User: users[i%len(users)], Status: 200, TTFT: time.Duration(i%5000) * time.Millisecond, Tokens: 40})
			i++
		}
	})
}

// BenchmarkSnapshot is what one page refresh costs the gateway.
func BenchmarkSnapshot(b *testing.B) {
	rec := NewRecorder()
	for i := range 10000 {
		rec.Record(Request{Model: "qwen", User: fmt.Sprint("u", i%50), Status: 200, TTFT: time.Duration(i) * time.Millisecond, Tokens: 40})
	}
	models := []Model{{Name: "qwen"}, {Name: "gemma"}}
	b.ReportAllocs()
	for b.Loop() {
		_ = rec.Snapshot(models)
	}
}

// TestFallbacksTaken: the requests a fallback answered count for the
// model asked for, over the window, and leave it with the window.
func TestFallbacksTaken(t *testing.T) {
	rec, c := newTestRecorder()
	rec.Record(Request{Model: "qwen", Status: 200, Fallback: true})
	rec.Record(Request{Model: "qwen", Status: 200})
	rec.Record(Request{Model: "gemma", Status: 200})
	s := rec.Snapshot([]Model{{Name: "qwen", Aliases: []string{"q"}}, {Name: "gemma"}})
	if got := s.Models[0].FallbacksTaken; got != 1 {
		t.Fatalf("qwen: %d fallbacks taken, want 1", got)
	}
	if got := s.Models[1].FallbacksTaken; got != 0 {
		t.Fatalf("gemma: %d fallbacks taken, want 0", got)
	}
	if s.Models[1].Aliases == nil || s.Models[1].Fallbacks == nil {
		t.Fatal("a model without aliases or fallbacks must list [] in JSON, not null")
	}
	c.add(Window + BucketWidth)
	if got := rec.Snapshot([]Model{{Name: "qwen"}}).Models[0].FallbacksTaken; got != 0 {
		t.Fatalf("after the window: %d fallbacks taken, want 0", got)
	}
}

// TestContinuedRate: streams continued on another replica are counted,
// the one that failed all the same among the errors too.
func TestContinuedRate(t *testing.T) {
	rec, c := newTestRecorder()
	for range 5 {
		c.add(BucketWidth)
	}
	rec.Record(Request{Model: "qwen", Status: 200, Continued: true})
	rec.Record(Request{Model: "qwen", Status: 200, Continued: true})
	rec.Record(Request{Model: "qwen", Status: 200, Continued: true, StreamError: true})
	rec.Record(Request{Model: "qwen", Status: 200})
	c.add(BucketWidth - time.Nanosecond)
	m := rec.Snapshot([]Model{{Name: "qwen"}}).Models[0]
	if math.Abs(m.ContinuedPerSecond-3.0/60) > 1e-6 || math.Abs(m.ErrorsPerSecond-1.0/60) > 1e-6 {
		t.Errorf("continued %v/s, errors %v/s; want 3/60 and 1/60", m.ContinuedPerSecond, m.ErrorsPerSecond)
	}
}
