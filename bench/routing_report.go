package bench

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// RoutingResult is one workload run under one policy.
type RoutingResult struct {
	Workload    string `json:"workload"`
	Policy      string `json:"policy"`
	Sent        int    `json:"sent"` // measured turns
	OK          int    `json:"ok"`
	Errors      int    `json:"errors"`
	ErrorSample string `json:"error_sample,omitempty"`
	// Held counts measured turns sent late because their conversation's
	// previous answer was still streaming when they were due.
	Held int `json:"held"`
	// HotShare is the share of the measured turns from tenant 0, the hot
	// one of the skewed workload: what the seeded draw actually gave.
	HotShare float64 `json:"hot_share"`
	// Seconds is the measured part of the schedule; AchievedRate the
	// successful measured turns per second of it.
	Seconds      float64  `json:"seconds"`
	AchievedRate float64  `json:"achieved_rate"`
	TTFT         *Summary `json:"ttft"` // from each turn's send to its first content event
	// Floor is the least TTFT any router could have given the same turns
	// (simulator.Floor): every prompt ever sent still cached where each
	// turn goes, nothing queued, no gateway or network in the way.
	Floor *Summary `json:"floor,omitempty"`

	// From the simulators' counters, over the window from the first
	// measured send to the end of the last turn (WindowSeconds).
	WindowSeconds float64 `json:"window_seconds"`
	PromptTokens  int64   `json:"prompt_tokens"` // looked up in the prefix caches
	CachedTokens  int64   `json:"cached_tokens"` // found there
	// HitRate is CachedTokens / PromptTokens: the replicas' own prefix
	// cache hit rate, in tokens, as vLLM's prefix_cache_hits/queries.
	HitRate float64 `json:"hit_rate"`
	// PrefillTokensPerS is the uncached prompt tokens the replicas
	// prefilled per second, all together: the GPU work the policy caused.
	PrefillTokensPerS float64 `json:"prefill_tokens_per_s"`
	// PrefillBusy is the share of the window the replicas' prefill lanes
	// were busy, on average.
	PrefillBusy float64 `json:"prefill_busy"`
	// ReplicaShares are each replica's share of the requests in the
	// window; BusiestShare the largest (1/replicas is even).
	ReplicaShares []float64 `json:"replica_shares"`
	BusiestShare  float64   `json:"busiest_share"`
	// Decisions are the gateway's routing decisions by reason (prefix,
	// load, round_robin, random), over the whole run, warm-up included.
	Decisions map[string]int `json:"decisions,omitempty"`

	GatewayCPUSeconds float64 `json:"gateway_cpu_seconds"`
	// OtherCPUCores is the CPU the rest of the machine used in the
	// window, in cores (not the client, the gateway or the simulators).
	OtherCPUCores float64 `json:"other_cpu_cores"`
}

// fromConversations fills the client's figures.
func (r *RoutingResult) fromConversations(cr convResult) {
	r.Sent, r.OK, r.Errors, r.ErrorSample, r.Held = cr.Sent, cr.OK, cr.Errors, cr.ErrorSample, cr.Held
	if r.Seconds > 0 {
		r.AchievedRate = float64(cr.OK) / r.Seconds
	}
	s, f := Summarize(cr.TTFT), Summarize(cr.Floor)
	r.TTFT, r.Floor = &s, &f
}

// fromSims fills the replicas' figures from their counters at the start
// and the end of the window, which lasted elapsed.
func (r *RoutingResult) fromSims(before, after []simStats, elapsed time.Duration, prefillPerToken time.Duration) {
	var requests int64
	counts := make([]int64, len(after))
	for i := range after {
		if i >= len(before) {
			break
		}
		counts[i] = after[i].Requests - before[i].Requests
		requests += counts[i]
		r.PromptTokens += after[i].PrefixCacheQueries - before[i].PrefixCacheQueries
		r.CachedTokens += after[i].PrefixCacheHits - before[i].PrefixCacheHits
	}
	r.ReplicaShares = make([]float64, len(counts))
	for i, n := range counts {
		if requests > 0 {
			r.ReplicaShares[i] = float64(n) / float64(requests)
		}
		r.BusiestShare = max(r.BusiestShare, r.ReplicaShares[i])
	}
	if r.PromptTokens > 0 {
		r.HitRate = float64(r.CachedTokens) / float64(r.PromptTokens)
	}
	r.WindowSeconds = elapsed.Seconds()
	if elapsed > 0 && len(after) > 0 {
		uncached := float64(r.PromptTokens - r.CachedTokens)
		r.PrefillTokensPerS = uncached / elapsed.Seconds()
		r.PrefillBusy = uncached * prefillPerToken.Seconds() / elapsed.Seconds() / float64(len(after))
	}
}

// brief is a one-line progress summary of r.
func (r RoutingResult) brief() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ok=%d errors=%d held=%d", r.OK, r.Errors, r.Held)
	if r.TTFT != nil {
		fmt.Fprintf(&b, " ttft p50=%.0fms p90=%.0fms p99=%.0fms", r.TTFT.P50, r.TTFT.P90, r.TTFT.P99)
	}
	fmt.Fprintf(&b, " hit=%.0f%% prefill busy=%.0f%% busiest=%.2f %s other=%.2f",
		100*r.HitRate, 100*r.PrefillBusy, r.BusiestShare, decisionsCell(r.Decisions), r.OtherCPUCores)
	if r.ErrorSample != "" {
		fmt.Fprintf(&b, " first error: %s", r.ErrorSample)
	}
	return b.String()
}

// routingResult finds the result of policy on workload.
func (r *Report) routingResult(workload, policy string) *RoutingResult {
	for i := range r.Routing {
		if r.Routing[i].Workload == workload && r.Routing[i].Policy == policy {
			return &r.Routing[i]
		}
	}
	return nil
}

// The routing targets: prefix_cache's p90 time to first token against the
// classic policies'.
const (
	maxP90VsRoundRobin       = 0.35 // uniform workload
	maxP90VsP2C              = 0.5  // uniform workload
	maxSkewedP90VsRoundRobin = 1.2  // skewed workload: no worse than round robin, within noise
)

// routingChecks evaluates the routing targets against the runs that exist.
func (r *Report) routingChecks() []Check {
	if len(r.Routing) == 0 {
		return nil
	}
	var cs []Check
	ratio := func(workload, other string, limit float64) {
		p, o := r.routingResult(workload, "prefix_cache"), r.routingResult(workload, other)
		if p == nil || o == nil || p.TTFT == nil || o.TTFT == nil || o.TTFT.P90 <= 0 {
			return
		}
		x := p.TTFT.P90 / o.TTFT.P90
		cs = append(cs, Check{
			Group:    groupRouting,
			Target:   fmt.Sprintf("%s: prefix_cache p90 TTFT ≤ %.2f× %s's", workload, limit, other),
			Measured: fmt.Sprintf("%.2f× (%.0f vs %.0f ms%s)", x, p.TTFT.P90, o.TTFT.P90, p.floorNote(o.TTFT.P90)),
			Met:      x <= limit,
		})
	}
	ratio(WorkloadUniform, "round_robin", maxP90VsRoundRobin)
	ratio(WorkloadUniform, "p2c", maxP90VsP2C)
	ratio(WorkloadSkewed, "round_robin", maxSkewedP90VsRoundRobin)
	cs = append(cs, noErrors(groupRouting, "no errors (every policy, both workloads)", len(r.Routing), func(i int) (string, int, int) {
		x := r.Routing[i]
		return x.Workload + " " + x.Policy, x.Errors, x.Sent
	}))
	return cs
}

// floorNote is what a p90 ratio against a p90 of other ms is to be read
// against: "; floor F ms, R×", the least p90 any router could have reached
// on r's turns, as a ratio to other's; "" without the floor.
func (r *RoutingResult) floorNote(other float64) string {
	if r.Floor == nil || r.Floor.Count == 0 || other <= 0 {
		return ""
	}
	return fmt.Sprintf("; floor %.0f ms, %.2f×", r.Floor.P90, r.Floor.P90/other)
}

// floorP90 is the floor's p90 for a table cell, "–" without one.
func (r *RoutingResult) floorP90() string {
	if r.Floor == nil || r.Floor.Count == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", r.Floor.P90)
}

// noErrors is the check that n runs had no error: run i is named, and
// counts its errors and the requests sent, by run(i); the runs that had
// errors are named in the measurement.
func noErrors(group, target string, n int, run func(i int) (name string, errs, sent int)) Check {
	errs, sent := 0, 0
	var where []string
	for i := range n {
		name, e, s := run(i)
		errs, sent = errs+e, sent+s
		if e > 0 {
			where = append(where, fmt.Sprintf("%s: %d", name, e))
		}
	}
	measured := fmt.Sprintf("%d errors in %d requests", errs, sent)
	if len(where) > 0 {
		measured += " (" + strings.Join(where, "; ") + ")"
	}
	return Check{Group: group, Target: target, Measured: measured, Met: errs == 0}
}

// routingMarkdown renders the routing scenario's section.
func (r *Report) routingMarkdown() string {
	var b bytes.Buffer
	c := r.RoutingConfig
	m := r.Machine
	fmt.Fprintf(&b, "Run %s, %.0f s: `%s`\n\n", r.Started.Format("2006-01-02 15:04 MST"), r.Seconds, r.Command)
	fmt.Fprintf(&b, "Machine: %s, %d cores, %.1f GB, Linux %s, %s; load average before %s, after %s.\n\n",
		m.CPU, m.Cores, m.MemoryGB, m.Kernel, m.Go, m.LoadBefore, m.LoadAfter)
	joined := ""
	if c.InProgress {
		joined = " (joined in progress: earlier turns sent as history)"
	}
	fmt.Fprintf(&b, "Workload: %d tenants, system prompts of %d–%d tokens; conversations of %d–%d turns%s, user messages of %d–%d tokens, answers of %d tokens; "+
		"Poisson arrivals at %g req/s, a conversation's turns at least %g s apart; %g s warm-up, then %g s measured; skewed: %.0f%% of the requests from one tenant%s; seed %d.  \n",
		c.Tenants, c.SystemWords[0], c.SystemWords[1], c.Turns[0], c.Turns[1], joined, c.UserWords[0], c.UserWords[1], c.ReplyTokens,
		c.Rate, c.MinGapS, c.WarmupS, c.DurationS, 100*c.HotShare, r.measuredHotShare(), c.Seed)
	fmt.Fprintf(&b, "Replicas: %d simulators; prefill %g µs per uncached prompt token, one prefill at a time, cached tokens free; then %g ms to the first token and %g ms per token; "+
		"prefix cache of %d blocks of %d tokens (%d tokens), LRU; at most %d sequences. Caches emptied before each policy; one gateway model per run.\n\n",
		c.Replicas, c.PrefillPerTokenUs, c.TTFTMs, c.ITLMs, c.KVCacheBlocks, c.BlockSize, c.KVCacheBlocks*c.BlockSize, c.MaxNumSeqs)

	b.WriteString("| workload | policy | TTFT p50 ms | p90 ms | floor p90 ms | p99 ms | max ms | replicas' cache hit rate | prefill busy | busiest replica | decisions | req/s | held | errors | gateway CPU s | other load |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|\n")
	for _, x := range r.Routing {
		t := x.TTFT
		if t == nil {
			t = &Summary{}
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | %.0f | %.0f | %.1f%% | %.0f%% | %.0f%% | %s | %.1f | %d | %d | %.2f | %.2f |\n",
			x.Workload, x.Policy, t.P50, t.P90, x.floorP90(), t.P99, t.Max, 100*x.HitRate, 100*x.PrefillBusy, 100*x.BusiestShare,
			decisionsCell(x.Decisions), x.AchievedRate, x.Held, x.Errors, x.GatewayCPUSeconds, x.OtherCPUCores)
	}
	b.WriteString("\nTTFT = from sending a turn to its first content event, through the gateway (HTTPS). " +
		"Floor = the least TTFT any router could have given the same turns: every prompt ever sent still cached on the replica each turn goes to, nothing queued, " +
		"no gateway or network time; only the tokens no earlier prompt had are prefilled (simulator.Floor, from the simulators' own blocks and prices). " +
		"Hit rate = prompt tokens found in the replicas' own prefix caches / tokens looked up (vLLM's prefix_cache_hits / prefix_cache_queries). " +
		"Prefill busy = the replicas' prefill lanes' average busy share. Busiest replica = its share of the requests (25% is even over 4). " +
		"Decisions = the gateway's routing decisions by reason, warm-up included. Held = turns sent late because their conversation's previous answer was not finished. " +
		"Other load = CPU cores used by the rest of the machine during the window.\n\n")

	b.WriteString("#### Routing targets\n\n| target | measured | met |\n|---|---|---|\n")
	writeChecks(&b, r.Checks, groupRouting)
	return b.String()
}

// measuredHotShare says what share of the skewed workload's measured
// requests the hot tenant actually sent, as ", N% of those measured".
func (r *Report) measuredHotShare() string {
	for _, x := range r.Routing {
		if x.Workload == WorkloadSkewed {
			return fmt.Sprintf(" (%.0f%% of those measured)", 100*x.HotShare)
		}
	}
	return ""
}

// decisionsCell shows decisions by reason as shares, largest first.
func decisionsCell(d map[string]int) string {
	total := 0
	for _, n := range d {
		total += n
	}
	if total == 0 {
		return "–"
	}
	reasons := slices.Sorted(maps.Keys(d))
	slices.SortStableFunc(reasons, func(a, b string) int { return d[b] - d[a] })
	parts := make([]string, 0, len(reasons))
	for _, k := range reasons {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*float64(d[k])/float64(total)))
	}
	return strings.Join(parts, ", ")
}
