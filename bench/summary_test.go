package bench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"one value", []time.Duration{7}, 50, 7},
		{"one value p99", []time.Duration{7}, 99, 7},
		{"two values p50", []time.Duration{1, 2}, 50, 1},
		{"two values p90", []time.Duration{1, 2}, 90, 2},
		{"hundred p50", hundred, 50, 50 * time.Millisecond},
		{"hundred p90", hundred, 90, 90 * time.Millisecond},
		{"hundred p99", hundred, 99, 99 * time.Millisecond},
		{"hundred p100", hundred, 100, 100 * time.Millisecond},
		{"hundred p0 is the minimum", hundred, 0, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{"empty", nil, Summary{}},
		{"unsorted", []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond},
			Summary{Count: 3, P50: 2, P90: 3, P99: 3, Max: 3, Mean: 2}},
		{"negative values (early tokens)", []time.Duration{-time.Millisecond, time.Millisecond},
			Summary{Count: 2, P50: -1, P90: 1, P99: 1, Max: 1, Mean: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.in); got != tt.want {
				t.Errorf("Summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}
