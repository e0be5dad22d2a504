package bench

import "slices"

// roundPairs pairs the runs of scenarios measured in rounds (each round a
// run without and a run with what is compared), in the order the rounds
// first appear: pair[0] is the run second reports false for, pair[1] the
// one it reports true for. A round that lacks either run is left out.
func roundPairs[T any](runs []T, round func(*T) int, second func(*T) bool) [][2]*T {
	byRound := map[int]*[2]*T{}
	var order []int
	for i := range runs {
		x := &runs[i]
		p := byRound[round(x)]
		if p == nil {
			p = &[2]*T{}
			byRound[round(x)] = p
			order = append(order, round(x))
		}
		if second(x) {
			p[1] = x
		} else {
			p[0] = x
		}
	}
	var out [][2]*T
	for _, n := range order {
		if p := byRound[n]; p[0] != nil && p[1] != nil {
			out = append(out, *p)
		}
	}
	return out
}

// median of xs (not empty); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
