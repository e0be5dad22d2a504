package pool

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// slowDetector judges a pool's replicas on their latency against their
// peers' and says, per replica, how likely it is to stay a candidate for a
// request (Replica.slow). It learns from every answer the pool's leases
// report; the request path only reads each replica's published verdict.
type slowDetector struct {
	s    SlowSettings // defaults filled
	now  func() time.Time
	rand func() float64 // in [0, 1)

	mu   sync.Mutex
	reps map[string]*slowReplica // by replica URL
}

// slowReplica is what the detector knows of one replica.
type slowReplica struct {
	fig figures
	// seen counts the answers measured since the replica joined the pool
	// or came back from an ejection.
	seen int
	// streak counts the answers in a row after which it was judged slow.
	streak int
	// judgedAt is when it was last judged, unjudged the answers since.
	judgedAt time.Time
	unjudged int
	state    SlowState
	score    float64
	until    time.Time // the end of an ejection
	// since: answers to requests that started before are not counted (they
	// ran while it was being ejected, or before it came back).
	since time.Time
	// backoff is the doubling of the next ejection's cool-down; lastEnd
	// the end of the last ejection (the doubling is forgotten MaxCooldown
	// after it).
	backoff   int
	lastEnd   time.Time
	ejections uint64
}

func newSlowDetector(s SlowSettings) *slowDetector {
	if s.Disabled {
		return nil
	}
	return &slowDetector{s: s.WithDefaults(), now: time.Now, rand: rand.Float64, reps: map[string]*slowReplica{}}
}

// judgeEvery spaces a replica's judgments: under heavy traffic its
// answers update its figures each, and it is judged on them at most this
// often (a judgment compares it with every peer), its streak counting the
// answers in between.
const judgeEvery = 50 * time.Millisecond

// probeSamples is how many answers a replica back from an ejection gives
// before it is judged again: a quarter of MinSamples, at least 3.
func (d *slowDetector) probeSamples() int { return max(3, d.s.MinSamples/4) }

// observe records one answer of r, judges r against the rest of all (the
// pool's replicas) and publishes its verdict.
func (d *slowDetector) observe(r *Replica, all []*Replica, smp latencySample) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	st := d.reps[r.URL]
	if st == nil {
		if !slices.Contains(all, r) {
			// A stream that ran to its end on a replica that left
			// meanwhile (drained): its figures would outlive it.
			return
		}
		st = &slowReplica{}
		d.reps[r.URL] = st
	}
	d.expire(st, now)
	// An ejected replica's answers (it served as the last resort) are not
	// judged: it is measured afresh when it comes back.
	if st.state == SlowEjected || smp.start.Before(st.since) || !st.fig.add(now, smp, d.s.HalfLife) {
		return
	}
	st.seen++
	need := d.s.MinSamples
	if st.state == SlowProbing {
		need = d.probeSamples()
	}
	if st.seen < need {
		return // not judged yet
	}
	if st.unjudged++; now.Sub(st.judgedAt) < judgeEvery {
		return // its figures are up to date; the judgment waits
	}

	// The peers: the other replicas usable now and measured enough.
	var buf [16]*figures
	peers := buf[:0]
	ejected, usable := 0, 0
	for _, o := range all {
		if o.URL == r.URL {
			continue
		}
		os := d.reps[o.URL]
		if os != nil {
			d.expire(os, now)
			if os.state == SlowEjected {
				ejected++
				continue
			}
		}
		if !o.Healthy() || o.breakerOpen() {
			continue
		}
		usable++
		if os != nil && os.seen >= d.s.MinSamples && os.state != SlowProbing {
			peers = append(peers, &os.fig)
		}
	}
	score, ok := 0.0, false
	if len(peers) > 0 {
		score, ok = st.fig.score(peers, now, d.s.HalfLife)
	}
	if !ok {
		st.unjudged = 0 // nothing to compare with: no streak either way
	} else {
		d.judge(st, score, len(all), ejected, usable, now)
	}
	if old := r.slow.Load(); old != nil && st.same(old) {
		return // nothing the request path or the operators would see changed
	}
	v := st.verdict()
	r.slow.Store(v)
	for _, o := range all {
		if o.URL == r.URL && o != r { // a newer object for the same replica
			o.slow.Store(v)
		}
	}
}

// same reports whether old still says what st would: its state, its
// ejections, and its score within 1%.
func (st *slowReplica) same(old *Slowness) bool {
	return old.State == st.state && old.Ejections == st.ejections && old.Until.Equal(st.until) &&
		math.Abs(old.Score-st.score) <= 0.01*st.score
}

// judge moves st by its new score: back to its full share when it is
// within Factor of its peers; otherwise weighted down, and ejected when it
// has been slow for MinSamples answers in a row (or at once, when its
// probes after an ejection are slow) if the pool can spare it.
func (d *slowDetector) judge(st *slowReplica, score float64, size, ejected, usable int, now time.Time) {
	st.score, st.judgedAt = score, now
	answers := max(st.unjudged, 1)
	st.unjudged = 0
	if score <= d.s.Factor {
		st.state, st.streak = SlowOK, 0
		return
	}
	st.streak += answers
	if st.state == SlowProbing || st.streak >= d.s.MinSamples {
		// Never more than MaxEjected of the pool, never the last one usable.
		if usable > 0 && float64(ejected+1) <= d.s.MaxEjected*float64(size) {
			d.eject(st, now)
			return
		}
	}
	st.state = SlowWeighted
}

// eject takes st out for its cool-down: Cooldown, doubled for each
// ejection that followed the end of the one before within MaxCooldown.
func (d *slowDetector) eject(st *slowReplica, now time.Time) {
	if !st.lastEnd.IsZero() && now.Sub(st.lastEnd) > d.s.MaxCooldown {
		st.backoff = 0
	}
	cool := d.s.MaxCooldown
	if st.backoff < 20 {
		cool = min(d.s.Cooldown<<st.backoff, d.s.MaxCooldown)
	}
	st.backoff++
	st.ejections++
	st.state, st.streak = SlowEjected, 0
	st.until, st.lastEnd, st.since = now.Add(cool), now.Add(cool), now
}

// expire turns an ejection whose cool-down is over into probing, with its
// figures forgotten: what they said was true of the replica as it was.
func (d *slowDetector) expire(st *slowReplica, now time.Time) {
	if st.state != SlowEjected || now.Before(st.until) {
		return
	}
	st.state, st.fig, st.seen, st.streak, st.score, st.since = SlowProbing, figures{}, 0, 0, 0, st.until
	st.unjudged, st.judgedAt = 0, time.Time{}
}

// verdict is st as the request path reads it.
func (st *slowReplica) verdict() *Slowness {
	v := &Slowness{State: st.state, Score: st.score, Keep: 1, Until: st.until, Ejections: st.ejections}
	switch st.state {
	case SlowWeighted:
		v.Keep = max(1/st.score, minKeep)
	case SlowEjected:
		v.Keep = 0
	case SlowProbing:
		v.Keep = probeShare
	}
	return v
}

// attach publishes the verdicts known for the replicas of a new set (a
// replica object may be new for a known URL) and forgets the replicas
// that left.
func (d *slowDetector) attach(set []*Replica) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := make(map[string]bool, len(set))
	for _, r := range set {
		in[r.URL] = true
		if st := d.reps[r.URL]; st != nil {
			r.slow.Store(st.verdict())
		}
	}
	for url := range d.reps {
		if !in[url] {
			delete(d.reps, url)
		}
	}
}

// partition reorders candidates so that those that stay candidates for
// this request come first, and returns how many they are. A replica
// weighted down stays with its Keep chance; an ejected one does not.
func (d *slowDetector) partition(candidates []*Replica) int {
	var now time.Time // read once, and only for an ejection
	k := 0
	for i, r := range candidates {
		keep := 1.0
		if v := r.slow.Load(); v != nil {
			keep = v.Keep
			if v.State == SlowEjected {
				if now.IsZero() {
					now = d.now()
				}
				keep = r.Slowness(now).Keep
			}
		}
		if keep >= 1 || (keep > 0 && d.rand() < keep) {
			candidates[k], candidates[i] = candidates[i], candidates[k]
			k++
		}
	}
	return k
}

// observe reports the lease's answer, a success on r, to the detector.
func (l *Lease) observe(r *Replica) {
	d := l.pool.slow
	smp := latencySample{start: l.start, first: l.first, end: d.now(), prompt: l.prompt, output: l.output}
	if smp.prompt < 0 {
		// Unknown: estimated from the messages, less the share of it the
		// policy expected the replica to hold in its prefix cache.
		est := 0.0
		if l.req != nil {
			est = promptTokens(l.req)
		}
		if c := l.Choice.Cached; c > 0 && c <= 1 {
			est *= 1 - c
		}
		smp.prompt = int(est)
	}
	d.observe(r, l.pool.Replicas(), smp)
}
