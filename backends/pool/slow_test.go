package pool

import (
	"math"
	"testing"
	"time"
)

// fakeClock is the detector's injected clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// slowPool is a pool of n replicas whose detector runs on clock, with the
// "random" draw fixed at draw.
func slowPool(t *testing.T, s SlowSettings, n int, draw float64) (*Pool, []*Replica, *fakeClock) {
	t.Helper()
	urls := []string{"http://a:1", "http://b:1", "http://c:1", "http://d:1", "http://e:1"}[:n]
	p := NewWithOptions("m", &rotate{}, Options{Slow: s, Breaker: BreakerSettings{Disabled: true}})
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	p.slow.now = clock.now
	p.slow.rand = func() float64 { return draw }
	rs := replicas(t, urls...)
	p.Set(rs)
	return p, rs, clock
}

// answer has r answer one streamed request with first token time ttft and
// 10 output tokens at perToken each, as a Lease would report it.
func answer(p *Pool, r *Replica, clock *fakeClock, ttft, perToken time.Duration) {
	start := clock.now()
	p.slow.observe(r, p.Replicas(), latencySample{start: start, first: start.Add(ttft),
		end: start.Add(ttft + 9*perToken), prompt: 100, output: 10})
}

// round has every replica answer once, one tick of clock later: the fast
// ones first, then those in slow at their factor times the others'
// latencies.
func round(p *Pool, rs []*Replica, clock *fakeClock, slow map[*Replica]float64) {
	clock.advance(100 * time.Millisecond)
	for _, fast := range []bool{true, false} {
		for _, r := range rs {
			f, ok := slow[r]
			if ok == fast {
				continue
			}
			if !ok {
				f = 1
			}
			answer(p, r, clock, time.Duration(f*float64(50*time.Millisecond)), time.Duration(f*float64(10*time.Millisecond)))
		}
	}
}

func TestDecayedHalvesEveryHalfLife(t *testing.T) {
	var d decayed
	t0 := time.Unix(0, 0)
	d.add(t0, 4, time.Second)
	d.add(t0, 2, time.Second)
	if got := d.mean(); got != 3 {
		t.Fatalf("mean %v, want 3", got)
	}
	if got := d.weight(t0.Add(time.Second), time.Second); math.Abs(got-1) > 1e-9 {
		t.Fatalf("weight after a half-life %v, want 1", got)
	}
	// A new sample a half-life later weighs as much as the two old ones.
	d.add(t0.Add(time.Second), 9, time.Second)
	if got := d.mean(); math.Abs(got-6) > 1e-9 {
		t.Fatalf("mean %v, want 6", got)
	}
}

func TestScore(t *testing.T) {
	now := time.Unix(0, 0)
	fig := func(ttftBucket0, ttftBucket3, token float64) *figures {
		f := &figures{}
		if ttftBucket0 > 0 {
			f.ttft[0].add(now, ttftBucket0, time.Minute)
		}
		if ttftBucket3 > 0 {
			f.ttft[3].add(now, ttftBucket3, time.Minute)
		}
		if token > 0 {
			f.token.add(now, token, time.Minute)
		}
		return f
	}
	tests := []struct {
		name  string
		f     *figures
		peers []*figures
		want  float64
		ok    bool
	}{
		{"as fast as its peers", fig(0.1, 0, 0.02), []*figures{fig(0.1, 0, 0.02), fig(0.1, 0, 0.02)}, 1, true},
		{"first token 10x", fig(1, 0, 0.02), []*figures{fig(0.1, 0, 0.02), fig(0.1, 0, 0.02)}, (1 + .005) / (0.1 + .005), true},
		{"per token 10x", fig(0.1, 0, 0.2), []*figures{fig(0.1, 0, 0.02), fig(0.1, 0, 0.02)}, (0.2 + .0005) / (0.02 + .0005), true},
		{"the median, not the mean, of the peers", fig(0.1, 0, 0), []*figures{fig(0.1, 0, 0), fig(0.1, 0, 0), fig(5, 0, 0)}, 1, true},
		{"long prompts compared with long prompts", fig(0.1, 2, 0), []*figures{fig(0.1, 2, 0), fig(0.1, 2, 0)}, 1, true},
		{"milliseconds are noise", fig(0.003, 0, 0), []*figures{fig(0.001, 0, 0)}, (0.003 + .005) / (0.001 + .005), true},
		{"no figure in common", fig(0, 1, 0), []*figures{fig(0.1, 0, 0)}, 0, false},
		{"no peers", fig(0.1, 0, 0.02), nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.f.score(tt.peers, now, time.Minute)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("score %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPromptBucket(t *testing.T) {
	for _, tt := range []struct{ tokens, want int }{{0, 0}, {511, 0}, {512, 1}, {2047, 1}, {2048, 2}, {8191, 2}, {8192, 3}, {1 << 20, 3}} {
		if got := promptBucket(tt.tokens); got != tt.want {
			t.Errorf("promptBucket(%d) = %d, want %d", tt.tokens, got, tt.want)
		}
	}
}

// TestSlowReplicaLifecycle walks a replica through the detection: judged
// only after MinSamples, weighted down, ejected after MinSamples slow
// answers in a row, probed back after its cool-down, ejected again for
// twice as long while still slow, and back to its full share once fast.
func TestSlowReplicaLifecycle(t *testing.T) {
	s := SlowSettings{Factor: 3, MinSamples: 8, HalfLife: 2 * time.Second, Cooldown: 10 * time.Second, MaxCooldown: 40 * time.Second}
	p, rs, clock := slowPool(t, s, 3, 0.5)
	a := rs[0]
	for range 7 {
		round(p, rs, clock, map[*Replica]float64{a: 10})
	}
	if st := a.Slowness(clock.now()).State; st != SlowOK {
		t.Fatalf("judged after 7 answers (min_samples 8): %v", st)
	}
	round(p, rs, clock, map[*Replica]float64{a: 10})
	v := a.Slowness(clock.now())
	if v.State != SlowWeighted || v.Score < 8 || math.Abs(v.Keep-1/v.Score) > 1e-9 {
		t.Fatalf("after 8 slow answers: %+v, want weighted down with a score near 10", v)
	}
	for _, r := range rs[1:] {
		if st := r.Slowness(clock.now()); st.State != SlowOK || st.Score > 1 {
			t.Fatalf("a fast replica: %+v", st)
		}
	}
	for range 7 { // 8 slow answers in a row, the first one counted above
		round(p, rs, clock, map[*Replica]float64{a: 10})
	}
	v = a.Slowness(clock.now())
	if v.State != SlowEjected || v.Ejections != 1 || !v.Until.Equal(clock.now().Add(10*time.Second)) {
		t.Fatalf("after 8 slow answers in a row: %+v, want ejected for 10s", v)
	}
	// Ejected: no request, but for the pool's last resort.
	for range 20 {
		if r, err := acquire(p, nil); err != nil || r == a {
			t.Fatalf("acquire while ejected: %v %v", r, err)
		}
	}
	if r, err := acquire(p, rs[1:]); err != nil || r != a {
		t.Fatalf("the others excluded: got %v %v, want the ejected one", r, err)
	}

	clock.advance(10 * time.Second)
	if v := a.Slowness(clock.now()); v.State != SlowProbing || v.Keep != probeShare {
		t.Fatalf("after its cool-down: %+v, want probing", v)
	}
	// Still slow: probes judged after a quarter of min_samples (at least
	// 3), then ejected at once, for twice as long.
	for range 3 {
		round(p, rs, clock, map[*Replica]float64{a: 10})
	}
	if v := a.Slowness(clock.now()); v.State != SlowEjected || !v.Until.Equal(clock.now().Add(20*time.Second)) {
		t.Fatalf("slow probes: %+v, want ejected for 20s", v)
	}
	clock.advance(20 * time.Second)
	for range 3 {
		round(p, rs, clock, nil)
	}
	if v := a.Slowness(clock.now()); v.State != SlowOK || v.Keep != 1 || v.Ejections != 2 {
		t.Fatalf("fast probes: %+v, want its full share back", v)
	}
}

// TestSlowJudgedEvery50ms: under heavy traffic a replica is judged at
// most every 50ms, and its streak counts every answer in between.
func TestSlowJudgedEvery50ms(t *testing.T) {
	s := SlowSettings{Factor: 3, MinSamples: 6, HalfLife: time.Minute}
	p, rs, clock := slowPool(t, s, 3, 0.5)
	a := rs[0]
	for range 6 {
		round(p, rs, clock, nil)
	}
	// An answer every 10ms: judged on every fifth, its streak counting the
	// five. Judged once per 50ms with a streak of one per judgment, it
	// would take 30 answers.
	for i := range 12 {
		clock.advance(10 * time.Millisecond)
		answer(p, a, clock, 500*time.Millisecond, 100*time.Millisecond)
		if st := p.slow.reps[a.URL]; i < 5 && st.state == SlowEjected {
			t.Fatalf("ejected after %d slow answers, fewer than min_samples", i+1)
		}
	}
	if st := a.Slowness(clock.now()).State; st != SlowEjected {
		t.Fatalf("after 12 slow answers: %v, want ejected", st)
	}
}

// TestSlowReplicaRecoversWhileWeightedDown: a replica weighted down that
// turns fast again gets its share back as the slow answers fade.
func TestSlowReplicaRecoversWhileWeightedDown(t *testing.T) {
	s := SlowSettings{Factor: 3, MinSamples: 10, HalfLife: time.Second, MaxEjected: 0.01} // never ejected
	p, rs, clock := slowPool(t, s, 3, 0.5)
	a := rs[0]
	for range 12 {
		round(p, rs, clock, map[*Replica]float64{a: 10})
	}
	if st := a.Slowness(clock.now()).State; st != SlowWeighted {
		t.Fatalf("state %v, want weighted down", st)
	}
	for i := 0; a.Slowness(clock.now()).State != SlowOK; i++ {
		if i > 40 {
			t.Fatalf("still %+v after 40 fast rounds", a.Slowness(clock.now()))
		}
		round(p, rs, clock, nil)
	}
}

func TestSlowEjectionBounds(t *testing.T) {
	tests := []struct {
		name       string
		n          int
		maxEjected float64
		slow       int // the first slow replicas are slow
		want       int // ejected
	}{
		{"half of four", 4, 0.5, 2, 2},
		{"one of three at 50%", 3, 0.5, 1, 1},
		{"one of two", 2, 0.5, 1, 1},
		{"a quarter of four", 4, 0.25, 2, 1},
		{"most slow: the fast one is the odd one, not them", 4, 1, 3, 0},
		{"none when the share allows none", 3, 0.2, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SlowSettings{Factor: 3, MinSamples: 4, HalfLife: time.Minute, MaxEjected: tt.maxEjected}
			p, rs, clock := slowPool(t, s, tt.n, 0.5)
			slow := map[*Replica]float64{}
			for _, r := range rs[:tt.slow] {
				slow[r] = 10
			}
			for range 30 {
				round(p, rs, clock, slow)
			}
			ejected := 0
			for _, r := range rs {
				if r.Slowness(clock.now()).State == SlowEjected {
					ejected++
				}
			}
			if ejected != tt.want {
				t.Fatalf("%d ejected, want %d", ejected, tt.want)
			}
		})
	}
}

// TestSlowJudge: a slow replica is ejected only when the pool can spare
// it: within max_ejected, and never the last usable replica.
func TestSlowJudge(t *testing.T) {
	tests := []struct {
		name                  string
		size, ejected, usable int
		maxEjected            float64
		streak                int
		state, want           SlowState
	}{
		{"slow, not yet for long", 3, 0, 2, 0.5, 0, SlowOK, SlowWeighted},
		{"slow for min_samples", 3, 0, 2, 0.5, 3, SlowWeighted, SlowEjected},
		{"the pool's share already out", 4, 2, 1, 0.5, 3, SlowWeighted, SlowWeighted},
		{"never the last usable", 2, 0, 0, 1, 3, SlowWeighted, SlowWeighted},
		{"slow probes: out again at once", 3, 0, 2, 0.5, 0, SlowProbing, SlowEjected},
		{"slow probes, nobody else usable", 3, 1, 0, 1, 0, SlowProbing, SlowWeighted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newSlowDetector(SlowSettings{MinSamples: 4, MaxEjected: tt.maxEjected})
			st := &slowReplica{state: tt.state, streak: tt.streak}
			d.judge(st, 10, tt.size, tt.ejected, tt.usable, time.Unix(0, 0))
			if st.state != tt.want {
				t.Fatalf("state %v, want %v", st.state, tt.want)
			}
			d.judge(st, 1, tt.size, tt.ejected, tt.usable, time.Unix(0, 0))
			if tt.want != SlowEjected && st.state != SlowOK {
				t.Fatalf("fast again: %v, want ok", st.state)
			}
		})
	}
}

// TestSlowWeightedDownShare: a replica weighted down stays a candidate with
// its chance (the draw), and is used when the others cannot be; the
// choice says how many were held back.
func TestSlowWeightedDownShare(t *testing.T) {
	s := SlowSettings{Factor: 3, MinSamples: 4, HalfLife: time.Minute, MaxEjected: 0.01} // never ejected
	for _, tt := range []struct {
		draw     float64
		heldBack bool
	}{{0.5, true}, {0.01, false}} {
		p, rs, clock := slowPool(t, s, 3, tt.draw)
		a := rs[0]
		for range 10 {
			round(p, rs, clock, map[*Replica]float64{a: 10})
		}
		if st := a.Slowness(clock.now()).State; st != SlowWeighted {
			t.Fatalf("state %v, want weighted down", st)
		}
		saw := false
		for range 6 {
			l, err := p.Acquire(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			saw = saw || l.Replica == a
			if tt.heldBack && l.Choice.SlowAvoided != 1 {
				t.Fatalf("draw %v: SlowAvoided %d, want 1", tt.draw, l.Choice.SlowAvoided)
			}
			l.Release(Excluded)
		}
		if saw == tt.heldBack {
			t.Fatalf("draw %v (keep %.2f): chosen %v", tt.draw, a.Slowness(clock.now()).Keep, saw)
		}
	}
}

// TestSlowLeaseTiming: a lease times its answer and reports it; an answer
// to a request started before an ejection is not counted afterwards.
func TestSlowLeaseTiming(t *testing.T) {
	p, rs, clock := slowPool(t, SlowSettings{MinSamples: 1}, 2, 0.5)
	l, err := p.Acquire(&Request{}, rs[1:])
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(200 * time.Millisecond)
	l.FirstToken()
	clock.advance(90 * time.Millisecond)
	l.Tokens(-1, 10) // prompt unknown: estimated from the messages
	l.Release(Success)
	f := p.slow.reps[rs[0].URL].fig
	if got := f.ttft[0].mean(); math.Abs(got-0.2) > 1e-9 {
		t.Fatalf("ttft %v, want 0.2", got)
	}
	if got := f.token.mean(); math.Abs(got-0.01) > 1e-9 {
		t.Fatalf("per token %v, want 0.01", got)
	}
	// A failure is the breaker's business, not a latency.
	l, _ = p.Acquire(&Request{}, rs[1:])
	clock.advance(time.Second)
	l.FirstToken()
	l.Release(Failure)
	if n := p.slow.reps[rs[0].URL].seen; n != 1 {
		t.Fatalf("seen %d, want 1", n)
	}
}

func TestSlowDisabled(t *testing.T) {
	p := NewWithOptions("m", &rotate{}, Options{Slow: SlowSettings{Disabled: true}})
	p.Set(replicas(t, "http://a:1", "http://b:1"))
	l, err := p.Acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.FirstToken()
	l.Release(Success)
	if p.slow != nil || !l.start.IsZero() {
		t.Fatal("detection runs though disabled")
	}
	if v := p.Replicas()[0].Slowness(time.Now()); v.State != SlowOK || v.Keep != 1 {
		t.Fatalf("%+v", v)
	}
}

func TestSlowSettings(t *testing.T) {
	d := SlowSettings{}.WithDefaults()
	if d.Factor != 3 || d.MinSamples != 20 || d.HalfLife != 30*time.Second || d.Cooldown != 30*time.Second ||
		d.MaxCooldown != 300*time.Second || d.MaxEjected != 0.5 {
		t.Fatalf("defaults %+v", d)
	}
	if c := (SlowSettings{Cooldown: time.Hour}).WithDefaults(); c.MaxCooldown != time.Hour {
		t.Fatalf("max_cooldown below cooldown: %v", c.MaxCooldown)
	}
	for _, tt := range []struct {
		s  SlowSettings
		ok bool
	}{
		{SlowSettings{}, true},
		{SlowSettings{Factor: 1.5, MaxEjected: 1}, true},
		{SlowSettings{Factor: 1}, false},
		{SlowSettings{Factor: math.NaN()}, false},
		{SlowSettings{MaxEjected: 1.5}, false},
		{SlowSettings{HalfLife: -time.Second}, false},
	} {
		if err := tt.s.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: %v", tt.s, err)
		}
	}
}
