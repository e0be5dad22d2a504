package bench

import (
	"strings"
	"testing"
)

func TestLargeCheck(t *testing.T) {
	lat := &Summary{P50: 1}
	row := func(path string, round int, cpu float64, errs int) Result {
		return Result{Scenario: "large-100k", Kind: "large", Path: path, Round: round, CPUPer1k: cpu, Errors: errs, Latency: lat}
	}
	for _, tc := range []struct {
		name    string
		results []Result
		met     bool
		has     string
	}{
		{"one round", []Result{row(PathCaddy, 0, 1, 0), row(PathLLMEdge, 0, 1.2, 0)}, true, "1.20× (1.200 vs 1.000"},
		{"median of three, one noisy round", []Result{
			row(PathCaddy, 1, 1, 0), row(PathLLMEdge, 1, 1.1, 0),
			row(PathLLMEdge, 2, 2.0, 0), row(PathCaddy, 2, 1, 0), // llmedge went first: a neighbour's burst
			row(PathCaddy, 3, 1, 0), row(PathLLMEdge, 3, 1.2, 0)}, true, "1.20×, the median of 3 rounds (1.10, 2.00, 1.20×"},
		{"median above the target", []Result{
			row(PathCaddy, 1, 1, 0), row(PathLLMEdge, 1, 1.3, 0),
			row(PathCaddy, 2, 1, 0), row(PathLLMEdge, 2, 1.4, 0)}, false, "1.35×"},
		{"errors fail it", []Result{row(PathCaddy, 1, 1, 0), row(PathLLMEdge, 1, 1, 3)}, false, "1.00×"},
		{"a round without caddy is left out", []Result{
			row(PathLLMEdge, 1, 5, 0),
			row(PathCaddy, 2, 1, 0), row(PathLLMEdge, 2, 1.1, 0)}, true, "1.10× (1.100 vs 1.000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := (&Report{Results: tc.results}).largeCheck()
			if !ok || c.Met != tc.met || !strings.Contains(c.Measured, tc.has) {
				t.Fatalf("ok %v, met %v, measured %q; want met %v and %q", ok, c.Met, c.Measured, tc.met, tc.has)
			}
		})
	}
	if _, ok := (&Report{Results: []Result{row(PathLLMEdge, 1, 1, 0)}}).largeCheck(); ok {
		t.Fatal("a check without stock Caddy's figure")
	}
}

func TestScenarioPathOrder(t *testing.T) {
	all := []string{PathReplica, PathCaddy, PathLLMEdge}
	for round, want := range map[int]string{0: "replica caddy llmedge", 1: "replica caddy llmedge", 2: "llmedge caddy replica", 3: "replica caddy llmedge"} {
		if got := strings.Join(scenario{Round: round}.paths(all), " "); got != want {
			t.Errorf("round %d: %s, want %s", round, got, want)
		}
	}
	if all[0] != PathReplica {
		t.Fatal("paths changed the caller's slice")
	}
}
