package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The scale-out scenario: the routing scenario's workload and simulators
// behind 1, 2 and 4 gateway instances, each a process of its own, all on
// one Redis, every request sent to an instance drawn at random (as an L4
// balancer spreads connections, here per request, so that a
// conversation's turns land on different instances). It compares
// prefix_cache with and without share_routing, and round robin, by how
// much adding instances costs in time to first token and throughput.

// shareSuffix marks a scale-out variant whose instances share their
// routing decisions (share_routing on).
const shareSuffix = "+share"

// The values of ScaleoutConfig.Spread.
const (
	SpreadRandom = "random"
	SpreadFirst  = "first"
)

// ScaleoutVariants are the scale-out scenario's default variants, in run
// order: the baseline, prefix_cache with each instance on its own view,
// and prefix_cache with the views shared over Redis.
var ScaleoutVariants = []string{"round_robin", "prefix_cache", "prefix_cache" + shareSuffix}

// ScaleoutConfig is the scale-out scenario. The workload's shape and the
// simulators are the routing scenario's (RoutingConfig), but for the rate
// and the windows, which are its own.
type ScaleoutConfig struct {
	// Variants are routing policy specs (policySpec), each optionally
	// followed by +share; empty skips the scenario.
	Variants  []string
	Instances []int  // gateway instance counts to run, each with every variant
	Workload  string // uniform or skewed
	// Spread is how turns are spread over the instances: SpreadRandom,
	// or SpreadFirst, every turn to the first instance with the others
	// running idle (but for the share's background work): a control that
	// shows what the extra processes cost the machine, apart from
	// routing across instances.
	Spread   string
	Rate     float64
	Warmup   time.Duration
	Duration time.Duration
}

// DefaultScaleoutConfig is the scenario as `llmbench -scenarios scaleout`
// runs it: about 2 minutes on 2 cores (131 s in a measured run).
func DefaultScaleoutConfig() ScaleoutConfig {
	return ScaleoutConfig{
		Variants:  ScaleoutVariants,
		Instances: []int{1, 2, 4},
		Workload:  WorkloadUniform,
		Spread:    SpreadRandom,
		Rate:      20,
		Warmup:    3 * time.Second,
		Duration:  8 * time.Second,
	}
}

// tinyScaleoutConfig is the scenario scaled down for the tests: one and two
// instances, every variant, short windows.
func tinyScaleoutConfig() ScaleoutConfig {
	c := DefaultScaleoutConfig()
	c.Instances = []int{1, 2}
	c.Warmup = 200 * time.Millisecond
	c.Duration = 600 * time.Millisecond
	return c
}

// Enabled reports whether the scenario runs at all.
func (c ScaleoutConfig) Enabled() bool { return len(c.Variants) > 0 && len(c.Instances) > 0 }

// scaleVariant is one parsed variant.
type scaleVariant struct {
	Name   string // as configured, e.g. prefix_cache+share
	Policy policySpec
	Share  bool
}

// parseVariant reads a variant: a policy spec, optionally with +share.
func parseVariant(s string) (scaleVariant, error) {
	rest, share := strings.CutSuffix(s, shareSuffix)
	p, err := parsePolicy(rest)
	if err != nil {
		return scaleVariant{}, fmt.Errorf("scaleout: %w", err)
	}
	return scaleVariant{Name: s, Policy: p, Share: share}, nil
}

// scaleModelName is the gateway model of a variant.
func scaleModelName(variant string) string {
	return "scaleout-" + strings.NewReplacer(":", "-", "=", "-", "+", "-").Replace(variant)
}

// spec is the workload of the scenario's runs: the routing scenario's
// shape at this scenario's rate and windows.
func (c ScaleoutConfig) spec(rc RoutingConfig) workloadSpec {
	rc.Rate, rc.Warmup, rc.Duration = c.Rate, c.Warmup, c.Duration
	return rc.spec(c.Workload)
}

// shareGroups splits the variants by share_routing, in order of first
// appearance: all the variants of a group run on one set of instances.
func shareGroups(variants []scaleVariant) [][]scaleVariant {
	var groups [][]scaleVariant
	for _, v := range variants {
		i := slices.IndexFunc(groups, func(g []scaleVariant) bool { return g[0].Share == v.Share })
		if i < 0 {
			groups = append(groups, []scaleVariant{v})
			continue
		}
		groups[i] = append(groups[i], v)
	}
	return groups
}

// maxInstances bounds an instance count: each instance is a gateway
// process on the same machine.
const maxInstances = 16

// validate reports a ScaleoutConfig that cannot run; rc is checked for
// the workload's shape and the simulators.
func (c ScaleoutConfig) validate(rc RoutingConfig) error {
	if !c.Enabled() {
		return nil
	}
	seen := map[string]bool{}
	for _, v := range c.Variants {
		if _, err := parseVariant(v); err != nil {
			return err
		}
		if seen[v] {
			return fmt.Errorf("scaleout: variant %q given twice", v)
		}
		seen[v] = true
	}
	for _, n := range c.Instances {
		if n < 1 || n > maxInstances {
			return fmt.Errorf("scaleout: %d instances: want 1..%d", n, maxInstances)
		}
	}
	if c.Spread != SpreadRandom && c.Spread != SpreadFirst {
		return fmt.Errorf("scaleout: unknown spread %q (want %s or %s)", c.Spread, SpreadRandom, SpreadFirst)
	}
	if c.Workload != WorkloadUniform && c.Workload != WorkloadSkewed {
		return fmt.Errorf("scaleout: unknown workload %q (want %s or %s)", c.Workload, WorkloadUniform, WorkloadSkewed)
	}
	rc.Rate, rc.Warmup, rc.Duration = c.Rate, c.Warmup, c.Duration
	if err := rc.validateShape(); err != nil {
		return fmt.Errorf("scaleout: %w", err)
	}
	return nil
}
