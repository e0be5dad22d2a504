package e2e

// The slow-replica measurement of BENCHMARKS.md: four simulated replicas,
// one slowed 10x at run time, with and without the detection of slow
// replicas, under two policies. It prints a table:
//
//	go test ./e2e -run '^$' -bench SlowReplica -benchtime 1x -timeout 20m

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func BenchmarkSlowReplica(b *testing.B) {
	rows := []string{"| policy | slow_replicas | slowed replica's share | client TTFT p50 | p90 | p99 | requests |", "|---|---|---|---|---|---|---|"}
	for _, policy := range []string{"round_robin", "least_requests", "prefix_cache"} {
		for _, detect := range []bool{false, true} {
			var sims []*Sim
			for i := range 4 {
				sims = append(sims, startSim(b, "-ttft", "40ms", "-itl", "5ms", "-tokens", "20", "-seed", fmt.Sprint(i+1)))
			}
			block := "\n\t\t\tslow_replicas off"
			if detect {
				block = slowReplicaDetection
			}
			g := startGateway(b, GatewayConfig{Models: map[string]string{
				"qwen":  staticModel(sims...) + "\n\t\t\tlb_policy " + policy + block,
				"gemma": staticModel(sims[0]),
			}})
			tok := g.Token(b, "demo", "demo", "")
			sl := startStreamLoad(g, tok, "qwen", 6)
			waitForB(b, 60*time.Second, func() bool { return sl.done.Load() >= 200 }) // warm
			before := make([]int, len(sims))
			for i, s := range sims {
				before[i] = s.Stats(b).Requests
			}
			sims[0].Configure(b, slowSim)
			from := time.Now()
			target := sl.done.Load() + 600
			waitForB(b, 120*time.Second, func() bool { return sl.done.Load() >= target })
			to := time.Now()
			mine, total := 0, 0
			for i, s := range sims {
				d := s.Stats(b).Requests - before[i]
				total += d
				if i == 0 {
					mine = d
				}
			}
			p50, p90, p99, n := sl.ttftQuantiles(from, to)
			close(sl.stop)
			sl.wg.Wait()
			mode := "off"
			if detect {
				mode = "on (factor 3, min_samples 10, half_life 3s, cooldown 4s)"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %.1f%% | %s | %s | %s | %d |", policy, mode,
				100*float64(mine)/float64(max(total, 1)), p50.Round(time.Millisecond), p90.Round(time.Millisecond), p99.Round(time.Millisecond), n))
			g.Stop(b)
			for _, s := range sims {
				s.Kill()
			}
		}
	}
	fmt.Println(strings.Join(rows, "\n"))
}

// waitForB is waitFor for a benchmark.
func waitForB(b *testing.B, d time.Duration, cond func() bool) {
	b.Helper()
	if !poll(d, cond) {
		b.Fatalf("condition not met within %s", d)
	}
}
