package bench

import (
	"slices"
	"time"
)

// Summary is the distribution of a set of durations.
type Summary struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// Summarize sorts ds in place and returns its percentiles (nearest rank)
// in milliseconds. An empty ds gives a zero Summary.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Summary{
		Count: len(ds),
		P50:   ms(percentile(ds, 50)),
		P90:   ms(percentile(ds, 90)),
		P99:   ms(percentile(ds, 99)),
		Max:   ms(ds[len(ds)-1]),
		Mean:  ms(sum / time.Duration(len(ds))),
	}
}

// percentile is the nearest-rank p-th percentile of the sorted, non-empty
// sorted: the smallest value with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(p/100*float64(len(sorted)) + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// ms converts d to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
