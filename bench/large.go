package bench

import (
	"fmt"
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

// largeRounds pairs the large-prompt scenario's results by round, in
// order: pair[0] stock Caddy's, pair[1] llmedge's; a round without both,
// or without a figure to compare, is left out.
func (r *Report) largeRounds() (name string, rounds [][2]*Result) {
	var runs []Result
	for _, x := range r.Results {
		if x.Kind == "large" && (x.Path == PathLLMEdge || x.Path == PathCaddy) {
			name = x.Scenario
			runs = append(runs, x)
		}
	}
	for _, p := range roundPairs(runs, func(x *Result) int { return x.Round }, func(x *Result) bool { return x.Path == PathLLMEdge }) {
		if p[0].CPUPer1k > 0 && p[0].Latency != nil && p[1].Latency != nil {
			rounds = append(rounds, p)
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
	var lcpu, ccpu []float64
	errs := 0
	var parts []string
	for i, p := range rounds {
		c, l := p[0], p[1]
		ratios[i] = l.CPUPer1k / c.CPUPer1k
		lcpu, ccpu = append(lcpu, l.CPUPer1k), append(ccpu, c.CPUPer1k)
		errs += l.Errors
		parts = append(parts, fmt.Sprintf("%.2f", ratios[i]))
	}
	ratio := median(ratios)
	target := fmt.Sprintf("CPU per request ≤ %.2f× stock Caddy (%s)", maxCPURatio, name)
	if len(rounds) == 1 {
		c, l := rounds[0][0], rounds[0][1]
		return Check{Target: target, Met: ratio <= maxCPURatio && errs == 0,
			Measured: fmt.Sprintf("%.2f× (%.3f vs %.3f CPU s / 1k req; p50 %.3f vs %.3f ms; %.0f vs %.0f req/s)",
				ratio, l.CPUPer1k, c.CPUPer1k, l.Latency.P50, c.Latency.P50, l.AchievedRate, c.AchievedRate)}, true
	}
	return Check{Target: target, Met: ratio <= maxCPURatio && errs == 0,
		Measured: fmt.Sprintf("%.2f×, the median of %d rounds (%s×; medians %.3f vs %.3f CPU s / 1k req)",
			ratio, len(rounds), strings.Join(parts, ", "), median(lcpu), median(ccpu))}, true
}
