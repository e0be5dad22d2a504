package pool

import (
	"math"
	"slices"
	"time"
)

// A replica's latency figures and its score against its peers. Each figure
// is a mean that forgets: every answer adds to a sum and a count that halve
// every half-life, so the mean follows the replica as it is now and the
// count says how much recent evidence stands behind it.

// decayed is a mean whose samples lose half their weight every half-life.
type decayed struct {
	sum, n float64
	at     time.Time // when sum and n were last brought up to date
}

// add brings the figure to now and adds x.
func (d *decayed) add(now time.Time, x float64, halfLife time.Duration) {
	f := d.factor(now, halfLife)
	d.sum, d.n, d.at = d.sum*f+x, d.n*f+1, now
}

// factor is how much the samples so far weigh at now.
func (d *decayed) factor(now time.Time, halfLife time.Duration) float64 {
	if d.at.IsZero() || !now.After(d.at) {
		return 1
	}
	return math.Exp2(-float64(now.Sub(d.at)) / float64(halfLife))
}

// weight is the samples' weight at now: 0 when there are none.
func (d *decayed) weight(now time.Time, halfLife time.Duration) float64 {
	return d.n * d.factor(now, halfLife)
}

// mean is the weighted mean; meaningless when n is 0. Decay scales sum
// and n alike, so it holds at any time.
func (d *decayed) mean() float64 { return d.sum / d.n }

// promptBuckets split first-token times by prompt size: a long prompt's
// prefill takes longer on every replica, so a replica is compared with its
// peers on prompts of its own size. The bounds are in prompt tokens.
var promptBounds = [...]int{512, 2048, 8192}

const promptBuckets = len(promptBounds) + 1

func promptBucket(tokens int) int {
	for i, b := range promptBounds {
		if tokens < b {
			return i
		}
	}
	return len(promptBounds)
}

// figures are one replica's latencies, in seconds.
type figures struct {
	// ttft is the time to first token of streamed answers, by prompt size.
	ttft [promptBuckets]decayed
	// token is the time per output token after the first (streamed).
	token decayed
	// whole is the time per output token of answers not streamed, where
	// the first token cannot be told from the rest.
	whole decayed
}

// latencySample is one answer's timing, taken by its Lease.
type latencySample struct {
	start, first, end time.Time // first is zero when the answer was not streamed
	prompt, output    int       // tokens
}

// add records s; false when s says nothing of the replica's speed (no
// token at all).
func (f *figures) add(now time.Time, s latencySample, halfLife time.Duration) bool {
	if !s.first.IsZero() {
		f.ttft[promptBucket(s.prompt)].add(now, s.first.Sub(s.start).Seconds(), halfLife)
		if s.output >= 2 {
			f.token.add(now, s.end.Sub(s.first).Seconds()/float64(s.output-1), halfLife)
		}
		return true
	}
	if s.output >= 1 {
		f.whole.add(now, s.end.Sub(s.start).Seconds()/float64(s.output), halfLife)
		return true
	}
	return false
}

// score is f's latency relative to its peers: for each figure, f's mean
// over the median of the peers' means (floors added to both, so that
// milliseconds of noise are no factor); the first-token figure is the
// average of its prompt sizes' ratios, weighted by f's samples in each.
// The score is the worst figure's ratio; ok is false when f and its
// peers have no figure in common.
func (f *figures) score(peers []*figures, now time.Time, halfLife time.Duration) (score float64, ok bool) {
	var sum, weight float64
	for b := range f.ttft {
		w := f.ttft[b].weight(now, halfLife)
		if w <= 0 {
			continue
		}
		if med, has := peerMedian(peers, func(p *figures) *decayed { return &p.ttft[b] }); has {
			sum += w * ratio(f.ttft[b].mean(), med, ttftFloor)
			weight += w
		}
	}
	if weight > 0 {
		score, ok = sum/weight, true
	}
	for _, get := range []func(p *figures) *decayed{
		func(p *figures) *decayed { return &p.token },
		func(p *figures) *decayed { return &p.whole },
	} {
		if get(f).n <= 0 {
			continue
		}
		if med, has := peerMedian(peers, get); has {
			score, ok = max(score, ratio(get(f).mean(), med, tokenFloor)), true
		}
	}
	return score, ok
}

// ratio compares mine with theirs, floor added to both.
func ratio(mine, theirs float64, floor time.Duration) float64 {
	return (mine + floor.Seconds()) / (theirs + floor.Seconds())
}

// peerMedian is the median of the peers' means of one figure, among
// those that have it.
func peerMedian(peers []*figures, get func(*figures) *decayed) (float64, bool) {
	var buf [16]float64
	vals := buf[:0]
	for _, p := range peers {
		if d := get(p); d.n > 0 {
			vals = append(vals, d.mean())
		}
	}
	if len(vals) == 0 {
		return 0, false
	}
	slices.Sort(vals)
	if m := len(vals) / 2; len(vals)%2 == 1 {
		return vals[m], true
	} else {
		return (vals[m-1] + vals[m]) / 2, true
	}
}
