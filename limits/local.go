package limits

import (
	"math"
	"sync"
	"time"
)

// The GCRA arithmetic, in microseconds, shared by the per-instance store
// and mirrored line for line by the Redis scripts (redis.go).
//
// A bucket with a limit of L per Window has an emission interval
// T = Window/L per unit and keeps one figure, its theoretical arrival time
// (TAT): the time at which it would be full again. A charge of c units
// moves the TAT to max(TAT, now) + c·T and is allowed while the TAT stays
// within Window of now — a full bucket holds a whole minute's allowance.
const (
	windowUS = float64(Window / time.Microsecond)
	// epsilonUS absorbs the rounding of T·c sums, so that L charges of 1
	// fit exactly in a full bucket.
	epsilonUS = 1
)

// gcraCharge returns the TAT after charging cost units, and whether the
// charge fits; when it does not, retry is the wait until it would.
func gcraCharge(tat, now float64, limit, cost int) (next float64, ok bool, retry float64) {
	if tat < now {
		tat = now
	}
	next = tat + float64(cost)*windowUS/float64(limit)
	if next-now > windowUS+epsilonUS {
		return tat, false, next - windowUS - now
	}
	return next, true, 0
}

// gcraQuota is what a bucket at tat has left, and the time until it is
// full.
func gcraQuota(tat, now float64, limit int) (remaining int, reset float64) {
	if tat < now {
		tat = now
	}
	reset = tat - now
	remaining = int(math.Floor((windowUS - reset + epsilonUS) * float64(limit) / windowUS))
	return max(0, min(remaining, limit)), reset
}

// gcraAdjust moves a bucket's TAT by delta units (a settlement: negative
// refunds). A refund never takes the TAT before now: a full bucket stays
// full.
func gcraAdjust(tat, now float64, limit, delta int) float64 {
	if delta > 0 && tat < now {
		tat = now
	}
	tat += float64(delta) * windowUS / float64(limit)
	if tat < now {
		tat = now
	}
	return tat
}

// localStore is the per-instance state: the store itself without Redis, the
// fallback while Redis is unreachable.
type localStore struct {
	mu      sync.Mutex
	buckets map[string]*localBucket
	now     func() time.Time
}

type localBucket struct {
	r, t float64 // TATs of requests and tokens, µs since the epoch
	conc int     // requests in flight
}

func newLocalStore(now func() time.Time) *localStore {
	if now == nil {
		now = time.Now
	}
	return &localStore{buckets: map[string]*localBucket{}, now: now}
}

func micros(t time.Time) float64 { return float64(t.UnixMicro()) }

// admit decides req and, when it passes, charges every bucket; t gets the
// reservations to settle.
func (s *localStore) admit(req *Request, t *Ticket) Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := micros(s.now())
	var nextR, nextT [MaxBuckets]float64
	d := Decision{Allowed: true}
	for i, b := range req.Buckets {
		lb := s.buckets[b.Key]
		if lb == nil {
			lb = &localBucket{}
		}
		if l := b.Limit.RPM; l > 0 {
			next, ok, retry := gcraCharge(lb.r, now, l, 1)
			if !ok {
				d = refused(KindRequests, i, retry)
				break
			}
			nextR[i] = next
		}
		if l := b.Limit.TPM; l > 0 {
			next, ok, retry := gcraCharge(lb.t, now, l, min(req.Tokens, l))
			if !ok {
				d = refused(KindTokens, i, retry)
				break
			}
			nextT[i] = next
		}
		if l := b.Limit.Concurrency; l > 0 && lb.conc >= l {
			d = refused(KindConcurrency, i, float64(time.Second/time.Microsecond))
			break
		}
	}
	for i, b := range req.Buckets {
		lb := s.buckets[b.Key]
		if d.Allowed {
			if lb == nil {
				lb = &localBucket{}
				s.buckets[b.Key] = lb
			}
			if b.Limit.RPM > 0 {
				lb.r = nextR[i]
			}
			if b.Limit.TPM > 0 {
				lb.t = nextT[i]
			}
			if b.Limit.Concurrency > 0 {
				lb.conc++
			}
			t.add(b, req.Tokens)
		}
		var r, tk float64
		if lb != nil {
			r, tk = lb.r, lb.t
		}
		d.note(b.Limit, now, r, tk)
	}
	return d
}

// settle moves each bucket's token TAT by its delta and frees the
// concurrency slots of t.
func (s *localStore) settle(t *Ticket, used int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := micros(s.now())
	for i := 0; i < t.n; i++ {
		tb := &t.b[i]
		lb := s.buckets[tb.key]
		if lb == nil {
			continue // swept: nothing to settle against
		}
		if delta := tb.delta(used); delta != 0 {
			lb.t = gcraAdjust(lb.t, now, tb.tpm, delta)
		}
		if tb.conc && lb.conc > 0 {
			lb.conc--
		}
	}
}

// sweep forgets the buckets that are full and idle: they would behave
// exactly as a new one.
func (s *localStore) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := micros(s.now())
	for k, lb := range s.buckets {
		if lb.conc == 0 && lb.r <= now && lb.t <= now {
			delete(s.buckets, k)
		}
	}
}

func (s *localStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buckets)
}

func refused(k Kind, bucket int, retryUS float64) Decision {
	return Decision{Refused: k, Bucket: bucket, RetryAfter: time.Duration(math.Ceil(retryUS)) * time.Microsecond}
}

// note folds a bucket's state into the decision's quotas, keeping the
// tightest bucket of each kind (the fewest remaining).
func (d *Decision) note(l Limit, now, tatR, tatT float64) {
	if l.RPM > 0 {
		rem, reset := gcraQuota(tatR, now, l.RPM)
		d.Requests.tighten(l.RPM, rem, reset)
	}
	if l.TPM > 0 {
		rem, reset := gcraQuota(tatT, now, l.TPM)
		d.Tokens.tighten(l.TPM, rem, reset)
	}
}

func (q *Quota) tighten(limit, remaining int, resetUS float64) {
	if q.Limit == 0 || remaining < q.Remaining {
		*q = Quota{Limit: limit, Remaining: remaining, Reset: time.Duration(math.Ceil(resetUS)) * time.Microsecond}
	}
}
