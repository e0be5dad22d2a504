package bench

import (
	"fmt"
	"math"
)

// Check is one of the targets, as measured by a run.
type Check struct {
	// Group is the section of the report the target belongs to: "" for
	// the request and stream scenarios, "routing" for the routing one.
	Group    string `json:"group,omitempty"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// groupRouting is the Check group of the routing targets.
const groupRouting = "routing"

// The targets, on the 2-core reference machine.
const (
	maxCPURatio      = 1.25 // llmedge CPU per request / stock Caddy's
	maxAddedP50Ms    = 0.05 // llmedge p50 - stock Caddy p50 at 1,000 req/s
	minMaxRateRatio  = 0.8  // llmedge's maximum throughput / stock Caddy's
	maxRelayDelayMs  = 2.0  // p99 per-token delay, llmedge less the replica alone
	maxStreamRSSMB   = 300
	maxIdleRSSMB     = 40
	targetRate       = 1000
	targetStreamsMin = 2000
)

// checks evaluates the targets against the results that exist: the rate
// run closest to 1,000 req/s, the max run and the largest streams run.
func (r *Report) checks() []Check {
	var cs []Check
	if rate := r.closestRate(targetRate); rate != "" {
		l, c := r.result(rate, PathLLMEdge), r.result(rate, PathCaddy)
		if l != nil && c != nil && c.CPUPer1k > 0 {
			ratio := l.CPUPer1k / c.CPUPer1k
			cs = append(cs, Check{
				Target:   fmt.Sprintf("CPU per request ≤ %.2f× stock Caddy (%s)", maxCPURatio, rate),
				Measured: fmt.Sprintf("%.2f× (%.3f vs %.3f CPU s / 1k req)", ratio, l.CPUPer1k, c.CPUPer1k),
				Met:      ratio <= maxCPURatio,
			})
			added := l.Latency.P50 - c.Latency.P50
			cs = append(cs, Check{
				Target:   fmt.Sprintf("adds ≤ %.0f µs to stock Caddy's p50 (%s)", maxAddedP50Ms*1000, rate),
				Measured: fmt.Sprintf("%+.0f µs (p50 %.3f vs %.3f ms)", added*1000, l.Latency.P50, c.Latency.P50),
				Met:      added <= maxAddedP50Ms,
			})
		}
	}
	if l, c := r.result("max", PathLLMEdge), r.result("max", PathCaddy); l != nil && c != nil && c.AchievedRate > 0 {
		ratio := l.AchievedRate / c.AchievedRate
		cs = append(cs, Check{
			Target:   fmt.Sprintf("maximum throughput ≥ %.1f× stock Caddy's (max)", minMaxRateRatio),
			Measured: fmt.Sprintf("%.2f× (%.0f vs %.0f req/s)", ratio, l.AchievedRate, c.AchievedRate),
			Met:      ratio >= minMaxRateRatio && l.Errors == 0,
		})
	}
	if l, c := r.result("max", PathLLMEdge), r.result("max", PathCaddy); l != nil && c != nil && c.CPUPer1k > 0 {
		ratio := l.CPUPer1k / c.CPUPer1k
		cs = append(cs, Check{
			Target:   fmt.Sprintf("CPU per request ≤ %.2f× stock Caddy (max)", maxCPURatio),
			Measured: fmt.Sprintf("%.2f× (%.3f vs %.3f CPU s / 1k req; %.0f vs %.0f req/s)", ratio, l.CPUPer1k, c.CPUPer1k, l.AchievedRate, c.AchievedRate),
			Met:      ratio <= maxCPURatio,
		})
	}
	if c, ok := r.largeCheck(); ok {
		cs = append(cs, c)
	}
	if s := r.largestStreams(); s != "" {
		l, base := r.result(s, PathLLMEdge), r.result(s, PathReplica)
		if l != nil && base != nil {
			relay := l.TokenDelay.P99 - base.TokenDelay.P99
			cs = append(cs, Check{
				Target:   fmt.Sprintf("p99 per-token relay delay < %.0f ms (%s, llmedge less the replica alone)", maxRelayDelayMs, s),
				Measured: fmt.Sprintf("%.2f ms (p99 %.2f vs %.2f ms)", relay, l.TokenDelay.P99, base.TokenDelay.P99),
				Met:      relay < maxRelayDelayMs && l.Errors == 0,
			})
		}
		if l != nil {
			cs = append(cs, Check{
				Target:   fmt.Sprintf("peak RSS < %d MB (%s)", maxStreamRSSMB, s),
				Measured: fmt.Sprintf("%.0f MB", l.PeakRSSMB),
				Met:      l.PeakRSSMB < maxStreamRSSMB,
			})
		}
		if l != nil && l.Streams < targetStreamsMin {
			cs = append(cs, Check{Target: fmt.Sprintf("%d concurrent streams", targetStreamsMin),
				Measured: fmt.Sprintf("only %d run", l.Streams)})
		}
	}
	if idle, ok := r.Idle[PathLLMEdge]; ok {
		cs = append(cs, Check{
			Target: fmt.Sprintf("idle RSS < %d MB", maxIdleRSSMB),
			Measured: fmt.Sprintf("%.1f MB, of which %.1f MB anonymous (stock Caddy %.1f MB, %.1f MB anonymous)",
				idle.RSSMB, idle.AnonMB, r.Idle[PathCaddy].RSSMB, r.Idle[PathCaddy].AnonMB),
			Met: idle.RSSMB < maxIdleRSSMB,
		})
	}
	return cs
}

// closestRate names the rate scenario nearest to rate, or "".
func (r *Report) closestRate(rate float64) string {
	best, dist := "", math.Inf(1)
	for _, x := range r.Results {
		if x.Kind == "rate" && math.Abs(x.TargetRate-rate) < dist {
			best, dist = x.Scenario, math.Abs(x.TargetRate-rate)
		}
	}
	return best
}

// largestStreams names the streams scenario with the most streams, or "".
func (r *Report) largestStreams() string {
	best, n := "", 0
	for _, x := range r.Results {
		if x.Kind == "streams" && x.Streams > n {
			best, n = x.Scenario, x.Streams
		}
	}
	return best
}
