package bench

import (
	"bytes"
	"fmt"
)

// ScaleoutResult is one variant run through one instance count. The
// embedded RoutingResult holds the client's and the replicas' figures
// (Policy is the variant); GatewayCPUSeconds there is all the instances'.
type ScaleoutResult struct {
	RoutingResult
	Variant   string `json:"variant"`
	Instances int    `json:"instances"`
	Share     bool   `json:"share_routing"`
	// GatewayCPUMsPerReq is the instances' CPU, all together, per
	// successful measured turn; RedisCPUMsPerReq Redis's.
	GatewayCPUMsPerReq float64 `json:"gateway_cpu_ms_per_req"`
	RedisCPUSeconds    float64 `json:"redis_cpu_seconds"`
	RedisCPUMsPerReq   float64 `json:"redis_cpu_ms_per_req"`
	// RedisCommands is what Redis ran in the window (every instance's
	// calls, whatever for); RedisOpsPerS the same per second.
	RedisCommands int64   `json:"redis_commands"`
	RedisOpsPerS  float64 `json:"redis_ops_per_s"`
	// SharedApplied counts the other instances' decisions the instances
	// applied to their indexes, over the whole run.
	SharedApplied int `json:"shared_applied"`
	// SharedDropped counts the decisions not published (buffer full or
	// Redis unreachable) and ShareErrors the failed Redis calls, both
	// over the whole run: a sharing that failed shows there.
	SharedDropped int `json:"shared_dropped"`
	ShareErrors   int `json:"share_errors"`
	// MachineBusyCores is the CPU the whole machine used in the window,
	// in cores: how close to its limit the run was.
	MachineBusyCores float64 `json:"machine_busy_cores"`
}

// The scale-out targets: 2 and more instances against one, per variant;
// and, on the uniform workload, a sharing variant against round robin
// through as many instances (issue 34: through one and through four).
const (
	maxScaleP90Ratio     = 1.1
	minScaleRateRatio    = 0.9
	maxScaleP90VsRoundRR = 0.15
)

// groupScaleout is the Check group of the scale-out targets.
const groupScaleout = "scaleout"

// scaleoutResult finds the run of variant through n instances.
func (r *Report) scaleoutResult(variant string, n int) *ScaleoutResult {
	for i := range r.Scaleout {
		if r.Scaleout[i].Variant == variant && r.Scaleout[i].Instances == n {
			return &r.Scaleout[i]
		}
	}
	return nil
}

// scaleRatios are a run's p90 TTFT and throughput against the same
// variant through one instance; ok is false without that run.
func (r *Report) scaleRatios(x ScaleoutResult) (p90, rate float64, ok bool) {
	one := r.scaleoutResult(x.Variant, 1)
	if one == nil || one.TTFT == nil || x.TTFT == nil || one.TTFT.P90 <= 0 || one.AchievedRate <= 0 {
		return 0, 0, false
	}
	return x.TTFT.P90 / one.TTFT.P90, x.AchievedRate / one.AchievedRate, true
}

// scaleoutChecks evaluates the targets of the design, the variants that
// share their routing (the others are shown for comparison, not held to
// them), and zero errors in every run.
func (r *Report) scaleoutChecks() []Check {
	if len(r.Scaleout) == 0 {
		return nil
	}
	var cs []Check
	for _, x := range r.Scaleout {
		rr := r.scaleoutResult("round_robin", x.Instances)
		if x.Share && x.Workload == WorkloadUniform && rr != nil && rr.TTFT != nil && x.TTFT != nil && rr.TTFT.P90 > 0 {
			ratio := x.TTFT.P90 / rr.TTFT.P90
			cs = append(cs, Check{
				Group:    groupScaleout,
				Target:   fmt.Sprintf("%s, %s: p90 TTFT ≤ %.2f× round_robin's", x.Variant, instances(x.Instances), maxScaleP90VsRoundRR),
				Measured: fmt.Sprintf("%.2f× (%.0f vs %.0f ms%s)", ratio, x.TTFT.P90, rr.TTFT.P90, x.floorNote(rr.TTFT.P90)),
				Met:      ratio <= maxScaleP90VsRoundRR,
			})
		}
		if !x.Share || x.Instances == 1 {
			continue
		}
		p90, rate, ok := r.scaleRatios(x)
		if !ok {
			continue
		}
		one := r.scaleoutResult(x.Variant, 1)
		cs = append(cs,
			Check{
				Group:    groupScaleout,
				Target:   fmt.Sprintf("%s, %d instances: p90 TTFT ≤ %.1f× one instance's", x.Variant, x.Instances, maxScaleP90Ratio),
				Measured: fmt.Sprintf("%.2f× (%.0f vs %.0f ms)", p90, x.TTFT.P90, one.TTFT.P90),
				Met:      p90 <= maxScaleP90Ratio,
			},
			Check{
				Group:    groupScaleout,
				Target:   fmt.Sprintf("%s, %d instances: throughput ≥ %.1f× one instance's", x.Variant, x.Instances, minScaleRateRatio),
				Measured: fmt.Sprintf("%.2f× (%.1f vs %.1f req/s)", rate, x.AchievedRate, one.AchievedRate),
				Met:      rate >= minScaleRateRatio,
			})
	}
	cs = append(cs, noErrors(groupScaleout, "no errors (every variant, every instance count)", len(r.Scaleout), func(i int) (string, int, int) {
		x := r.Scaleout[i]
		return fmt.Sprintf("%s ×%d", x.Variant, x.Instances), x.Errors, x.Sent
	}))
	return cs
}

// scaleoutMarkdown renders the scale-out scenario's section.
func (r *Report) scaleoutMarkdown() string {
	var b bytes.Buffer
	m := r.Machine
	fmt.Fprintf(&b, "Run %s, %.0f s: `%s`\n\n", r.Started.Format("2006-01-02 15:04 MST"), r.Seconds, r.Command)
	fmt.Fprintf(&b, "Machine: %s, %d cores, %.1f GB, Linux %s, %s; load average before %s, after %s.\n\n",
		m.CPU, m.Cores, m.MemoryGB, m.Kernel, m.Go, m.LoadBefore, m.LoadAfter)
	if r.ScaleoutSkipped != "" {
		fmt.Fprintf(&b, "Scale-out scenario skipped: %s.\n", r.ScaleoutSkipped)
		return b.String()
	}
	if c := r.ScaleoutConfig; c != nil {
		fmt.Fprintf(&b, "Workload: the routing scenario's %s workload (%d tenants, system prompts of %d–%d tokens, conversations of %d–%d turns, answers of %d tokens, seed %d) "+
			"at %g req/s, Poisson; %g s warm-up, then %g s measured. %d simulators as in the routing scenario, caches emptied before each run. "+
			"%s "+
			"Instances: separate bin/llmedge processes, one storage folder, one redis-server, every variant's model in each; `+share` = `share_routing on`, the others `share_routing off` (Redis configured in both).\n\n",
			c.Workload, c.Tenants, c.SystemWords[0], c.SystemWords[1], c.Turns[0], c.Turns[1], c.ReplyTokens, c.Seed,
			c.Rate, c.WarmupS, c.DurationS, c.Replicas, spreadText(c.Spread))
	}
	b.WriteString("| variant | instances | TTFT p50 ms | p90 ms | floor p90 ms | p99 ms | p90 vs 1 | req/s | vs 1 | errors | held | replicas' cache hit rate | decisions | applied from others | gateway CPU ms/req | Redis ops/s | Redis CPU ms/req | machine busy cores | other load |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.Scaleout {
		t := x.TTFT
		if t == nil {
			t = &Summary{}
		}
		p90, rate := "–", "–"
		if x.Instances > 1 {
			if pr, rr, ok := r.scaleRatios(x); ok {
				p90, rate = fmt.Sprintf("%.2f×", pr), fmt.Sprintf("%.2f×", rr)
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %s | %.0f | %s | %.1f | %s | %d | %d | %.1f%% | %s | %s | %.2f | %.0f | %.3f | %.2f | %.2f |\n",
			x.Variant, x.Instances, t.P50, t.P90, x.floorP90(), t.P99, p90, x.AchievedRate, rate, x.Errors, x.Held, 100*x.HitRate,
			decisionsCell(x.Decisions), x.sharedCell(), x.GatewayCPUMsPerReq, x.RedisOpsPerS, x.RedisCPUMsPerReq,
			x.MachineBusyCores, x.OtherCPUCores)
	}
	b.WriteString("\nFloor = the least TTFT any router could have given the same turns (as in the routing scenario). p90 vs 1, req/s vs 1 = against the same variant through one instance. Held = turns sent late because their conversation's previous answer was not finished. " +
		"Applied from others = the other instances' decisions the instances recorded in their indexes (shared routing only), with the decisions dropped unpublished and the failed Redis calls when there were any. " +
		"Gateway CPU = all the instances' CPU time in the window per successful turn; Redis ops/s = commands Redis ran in the window (INFO `total_commands_processed`) per second, " +
		"whatever they were for; Redis CPU likewise per turn. Machine busy cores = the CPU the whole machine used in the window (of " + fmt.Sprint(m.Cores) + "); " +
		"other load = the part of it not used by the benchmark's processes (client, simulators, Redis, instances).\n\n")
	b.WriteString("#### Scale-out targets\n\n| target | measured | met |\n|---|---|---|\n")
	writeChecks(&b, r.Checks, groupScaleout)
	return b.String()
}

// sharedCell shows the decisions applied from other instances, and what
// was lost on the way when anything was.
func (x ScaleoutResult) sharedCell() string {
	s := fmt.Sprint(x.SharedApplied)
	if x.SharedDropped > 0 {
		s += fmt.Sprintf(", %d dropped", x.SharedDropped)
	}
	if x.ShareErrors > 0 {
		s += fmt.Sprintf(", %d Redis errors", x.ShareErrors)
	}
	return s
}

// spreadText says how the turns were spread over the instances.
func spreadText(spread string) string {
	if spread == SpreadFirst {
		return "**Control run: every turn to the first instance**, the others running idle (their share of Redis's stream included)."
	}
	return "Every turn goes to an instance drawn at random (the same draws for every variant at an instance count)."
}

// instances names an instance count.
func instances(n int) string {
	if n == 1 {
		return "1 instance"
	}
	return fmt.Sprintf("%d instances", n)
}
