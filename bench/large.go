package bench

import (
	"fmt"
	"slices"
	"strings"
)

// label names x's scenario in the tables: with its round, when the
// scenario has rounds.
func (x Result) label() string {
	if x.Round == 0 {
		return x.Scenario
	}
	return fmt.Sprintf("%s #%d", x.Scenario, x.Round)
}

// largeRound is one round of the large-prompt scenario: llmedge's and
// stock Caddy's results.
type largeRound struct{ llmedge, caddy *Result }

// largeRounds pairs the large-prompt scenario's results by round, in
// order; a round without both paths is left out.
func (r *Report) largeRounds() (name string, rounds []largeRound) {
	byRound := map[int]*largeRound{}
	var order []int
	for i := range r.Results {
		x := &r.Results[i]
		if x.Kind != "large" || (x.Path != PathLLMEdge && x.Path != PathCaddy) {
			continue
		}
		name = x.Scenario
		lr := byRound[x.Round]
		if lr == nil {
			lr = &largeRound{}
			byRound[x.Round] = lr
			order = append(order, x.Round)
		}
		if x.Path == PathLLMEdge {
			lr.llmedge = x
		} else {
			lr.caddy = x
		}
	}
	for _, n := range order {
		lr := byRound[n]
		if lr.llmedge != nil && lr.caddy != nil && lr.caddy.CPUPer1k > 0 && lr.llmedge.Latency != nil && lr.caddy.Latency != nil {
			rounds = append(rounds, *lr)
		}
	}
	return name, rounds
}

// largeCheck is the large-prompt target: llmedge's CPU per request
// against stock Caddy's, the median of the rounds' ratios (each round's
// two runs are next to each other in time, so a drift of the machine
// moves both).
func (r *Report) largeCheck() (Check, bool) {
	name, rounds := r.largeRounds()
	if len(rounds) == 0 {
		return Check{}, false
	}
	ratios := make([]float64, len(rounds))
	errs := 0
	var parts []string
	for i, lr := range rounds {
		ratios[i] = lr.llmedge.CPUPer1k / lr.caddy.CPUPer1k
		errs += lr.llmedge.Errors
		parts = append(parts, fmt.Sprintf("%.2f", ratios[i]))
	}
	ratio := median(ratios)
	target := fmt.Sprintf("CPU per request ≤ %.2f× stock Caddy (%s)", maxCPURatio, name)
	if len(rounds) == 1 {
		l, c := rounds[0].llmedge, rounds[0].caddy
		return Check{Target: target, Met: ratio <= maxCPURatio && errs == 0,
			Measured: fmt.Sprintf("%.2f× (%.3f vs %.3f CPU s / 1k req; p50 %.3f vs %.3f ms; %.0f vs %.0f req/s)",
				ratio, l.CPUPer1k, c.CPUPer1k, l.Latency.P50, c.Latency.P50, l.AchievedRate, c.AchievedRate)}, true
	}
	var lcpu, ccpu []float64
	for _, lr := range rounds {
		lcpu, ccpu = append(lcpu, lr.llmedge.CPUPer1k), append(ccpu, lr.caddy.CPUPer1k)
	}
	return Check{Target: target, Met: ratio <= maxCPURatio && errs == 0,
		Measured: fmt.Sprintf("%.2f×, the median of %d rounds (%s×; medians %.3f vs %.3f CPU s / 1k req)",
			ratio, len(rounds), strings.Join(parts, ", "), median(lcpu), median(ccpu))}, true
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
