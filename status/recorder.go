// Package status keeps what the operators' status page shows beyond the
// replicas' current state: per model, requests, errors and refusals per
// second and the time to first token over the last minutes; per user, the
// tokens used and the requests refused. It is fed from the request path
// (Recorder.Record, once per answered request) and read when the page asks
// (Recorder.Snapshot), and serves the page itself (Handler).
//
// Figures are kept in a ring of BucketWidth buckets per model and for the
// users. Recording is a few atomic additions into the current bucket: no
// lock is taken on the request path except once per bucket width, by the
// one request that recycles the oldest bucket, so requests never queue
// behind each other or behind a reader.
//
// The package imports nothing from Caddy or the gateway.
package status

import (
	"sync"
	"sync/atomic"
	"time"
)

// Geometry of the windows.
const (
	// BucketWidth is the time one bucket covers.
	BucketWidth = 10 * time.Second
	// RateWindow is the span over which per-second rates are averaged:
	// long enough to smooth bursts, short enough to show an incident
	// within seconds.
	RateWindow = time.Minute
	// Window is the span of the time-to-first-token quantiles and of the
	// per-user figures.
	Window = 5 * time.Minute
	// ringSize holds Window plus the bucket being filled.
	ringSize = int(Window/BucketWidth) + 1
)

// Request is what one answered request contributes. It carries no content
// and no credential: the user is the principal's subject (a user name, an
// API key's id), never its token.
type Request struct {
	// Model is the model type; "" when the request was refused before its
	// body was read (it then counts for its user only).
	Model string
	// User is the authenticated principal; "" when there is none.
	User string
	// Status is the HTTP status the client got (499: it left first).
	Status int
	// StreamError: a stream that failed after it started (Status 200).
	StreamError bool
	// Continued: a stream continued on another replica after its replica
	// failed mid-stream (it may still have failed: StreamError).
	Continued bool
	// TTFT is the replica's time to first token; 0 when none arrived.
	TTFT time.Duration
	// Tokens are the prompt and completion tokens the replica reported.
	Tokens int
	// Refusal says why a 403 or 429 was answered (see Refusal*).
	Refusal string
	// Fallback: another model answered in Model's place (its fallback),
	// because no replica of Model could take the request.
	Fallback bool
	// Shed: refused at once (429) as sheddable work, Model being
	// saturated.
	Shed bool
}

// Reasons a request was refused, as the gateway tells them.
const (
	// RefusalLimit: a limit of the tenant's (429 before routing).
	RefusalLimit = "limit"
	// RefusalBusy: every replica was busy and the wait queue full or timed
	// out (429 from routing); not the user's doing.
	RefusalBusy = "busy"
	// RefusalScope: the credential does not cover the model (403).
	RefusalScope = "scope"
)

// RefusalOf classifies status for a request that reached, or not, the
// routing stage: the hook through which refusals are counted per user
// whichever stage (scope, tenant limits, the replicas' queue) answered.
func RefusalOf(status int, routed bool) string {
	switch {
	case status == 403:
		return RefusalScope
	case status == 429 && routed:
		return RefusalBusy
	case status == 429:
		return RefusalLimit
	}
	return ""
}

// Recorder keeps the windows. It is safe for concurrent use; the zero
// value is not usable, use NewRecorder.
type Recorder struct {
	start  time.Time
	now    func() time.Time
	models sync.Map // model type → *series
	users  userRing
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), now: time.Now}
}

// epochOf numbers the bucket t falls in. Zero is never a current epoch,
// so a zero bucket is an empty one.
func epochOf(t time.Time) int64 { return t.UnixNano() / int64(BucketWidth) }

// Record adds r to the current buckets. It is called once per request,
// on the request path. A nil Recorder records nothing.
func (rec *Recorder) Record(r Request) {
	if rec == nil {
		return
	}
	epoch := epochOf(rec.now())
	if r.Model != "" {
		s, ok := rec.models.Load(r.Model)
		if !ok {
			s, _ = rec.models.LoadOrStore(r.Model, new(series))
		}
		if b := s.(*series).at(epoch); b != nil {
			b.add(r)
		}
	}
	if r.User != "" {
		rec.users.add(epoch, r)
	}
}

// series is one model's ring of buckets.
type series struct {
	mu      sync.Mutex // taken to recycle a bucket only
	buckets [ringSize]bucket
}

// bucket holds one BucketWidth of a model's requests.
type bucket struct {
	epoch                                 atomic.Int64
	requests, errors, refusals, continued atomic.Uint64
	fallbacks                             atomic.Uint64
	shed                                  atomic.Uint64
	ttft                                  histogram
}

// at returns the bucket of epoch, recycling the oldest one when epoch is
// new; nil when that slot already holds a later epoch (a request that
// took longer than the whole window to record: dropped).
func (s *series) at(epoch int64) *bucket {
	b := &s.buckets[epoch%int64(ringSize)]
	if e := b.epoch.Load(); e != epoch {
		if e > epoch {
			return nil
		}
		s.mu.Lock()
		if e := b.epoch.Load(); e < epoch {
			// Counters first, epoch last: a reader that sees the new epoch
			// sees cleared counters (plus what writers added since).
			b.requests.Store(0)
			b.errors.Store(0)
			b.refusals.Store(0)
			b.fallbacks.Store(0)
			b.shed.Store(0)
			b.continued.Store(0)
			b.ttft.reset()
			b.epoch.Store(epoch)
		}
		s.mu.Unlock()
		if b.epoch.Load() != epoch {
			return nil
		}
	}
	return b
}

func (b *bucket) add(r Request) {
	b.requests.Add(1)
	if r.Status >= 500 || r.StreamError {
		b.errors.Add(1)
	}
	if r.Status == 429 {
		b.refusals.Add(1)
	}
	if r.Fallback {
		b.fallbacks.Add(1)
	}
	if r.Shed {
		b.shed.Add(1)
	}
	if r.Continued {
		b.continued.Add(1)
	}
	if r.TTFT > 0 {
		b.ttft.add(r.TTFT)
	}
}

// totals are a model's figures summed over some buckets.
type totals struct {
	requests, errors, refusals, continued uint64
	fallbacks, shed                       uint64
	ttft                                  histogram
}

// sum adds the buckets of the last n epochs up to cur to t, the TTFT
// histogram only when withTTFT.
func (s *series) sum(cur int64, n int, withTTFT bool, t *totals) {
	for i := range s.buckets {
		b := &s.buckets[i]
		if e := b.epoch.Load(); e <= cur-int64(n) || e > cur {
			continue
		}
		t.requests += b.requests.Load()
		t.errors += b.errors.Load()
		t.refusals += b.refusals.Load()
		t.fallbacks += b.fallbacks.Load()
		t.shed += b.shed.Load()
		t.continued += b.continued.Load()
		if withTTFT {
			t.ttft.merge(&b.ttft)
		}
	}
}
