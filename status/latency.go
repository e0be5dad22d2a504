package status

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// A histogram counts durations in logarithmic bins of microseconds: the
// values below 8 µs exactly, then 8 bins per power of two, so a bin is at
// most 1/8 wider than its lower bound and a quantile read from it is off
// by at most about 6 % (half a bin) after interpolation. Finding a bin is
// a few bit operations; adding is one atomic increment, with no lock.
// Everything from 0 to 2^31 µs (about 36 minutes, above which values are
// clamped) fits in 232 bins: under 1 KiB per bucket.
const (
	subBins     = 8
	latencyBins = (maxBinBits-3)*subBins + subBins // bins for values below 2^maxBinBits µs
	maxBinBits  = 31                               // 2^31 µs ≈ 36 minutes
)

type histogram struct {
	bins [latencyBins]atomic.Uint32
}

// binOf is the bin of us microseconds.
func binOf(us uint64) int {
	if us < subBins {
		return int(us)
	}
	n := bits.Len64(us) // ≥ 4: us has n significant bits
	if n > maxBinBits {
		return latencyBins - 1
	}
	// The three bits after the leading one pick the sub-bin.
	return (n-3)*subBins + int((us>>(n-4))&(subBins-1))
}

// binBounds are the lowest value of bin i and the lowest of the next one,
// in microseconds.
func binBounds(i int) (lo, hi float64) {
	if i < subBins {
		return float64(i), float64(i + 1)
	}
	n := i/subBins + 3
	sub := uint64(i % subBins)
	shift := uint(n - 4)
	return float64((subBins + sub) << shift), float64((subBins + sub + 1) << shift)
}

func (h *histogram) add(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.bins[binOf(uint64(us))].Add(1)
}

func (h *histogram) reset() {
	for i := range h.bins {
		h.bins[i].Store(0)
	}
}

// merge adds o's counts to h (h is private to the reader).
func (h *histogram) merge(o *histogram) {
	for i := range o.bins {
		if n := o.bins[i].Load(); n > 0 {
			h.bins[i].Store(h.bins[i].Load() + n)
		}
	}
}

// samples is the number of durations counted.
func (h *histogram) samples() uint64 {
	var total uint64
	for i := range h.bins {
		total += uint64(h.bins[i].Load())
	}
	return total
}

// quantile returns the q-quantile (0 < q < 1) in seconds, interpolated
// within its bin, and false when the histogram is empty.
func (h *histogram) quantile(q float64) (float64, bool) {
	total := h.samples()
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	var seen float64
	for i := range h.bins {
		n := float64(h.bins[i].Load())
		if n == 0 {
			continue
		}
		if seen+n >= rank {
			lo, hi := binBounds(i)
			us := lo + (hi-lo)*(rank-seen)/n
			return us / 1e6, true
		}
		seen += n
	}
	lo, _ := binBounds(latencyBins - 1)
	return lo / 1e6, true
}
