package bench

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/llmedge/llmedge/simulator"
)

// The routing scenario's workloads.
const (
	// WorkloadUniform spreads requests evenly over the tenants.
	WorkloadUniform = "uniform"
	// WorkloadSkewed sends HotShare of the requests from one tenant.
	WorkloadSkewed = "skewed"
)

// RoutingPolicies are the balancing policies the routing scenario
// compares, in run order: llmedge's lb_policy names.
var RoutingPolicies = []string{"prefix_cache", "p2c", "round_robin", "least_requests", "random"}

// policySpec is a policy as the routing scenario's configuration names it:
// an lb_policy name, optionally with options of its Caddyfile block, as
// name:option=value:option=value (e.g. prefix_cache:load_factor=2), so
// that a run can compare settings of one policy.
type policySpec struct {
	Name    string
	Options [][2]string
}

// parsePolicy reads a policy spec.
func parsePolicy(s string) (policySpec, error) {
	name, rest, _ := strings.Cut(s, ":")
	p := policySpec{Name: name}
	if !slices.Contains(RoutingPolicies, name) {
		return p, fmt.Errorf("routing: unknown policy %q (want one of %v)", name, RoutingPolicies)
	}
	for opt := range strings.SplitSeq(rest, ":") {
		if opt == "" {
			continue
		}
		k, v, ok := strings.Cut(opt, "=")
		if !ok || !optionWord.MatchString(k) || !optionWord.MatchString(v) {
			return p, fmt.Errorf("routing: policy %q: want option=value, got %q", s, opt)
		}
		p.Options = append(p.Options, [2]string{k, v})
	}
	return p, nil
}

// optionWord is what an option's name or value may be: nothing that could
// break out of the Caddyfile block.
var optionWord = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

// RoutingConfig is the routing scenario: Replicas simulator processes with
// a prefix cache and a prefill cost behind one llmedge, a conversation
// workload from Tenants tenants, run once per policy and workload, each
// run starting from empty caches.
type RoutingConfig struct {
	Policies  []string // lb_policy names, with options (policySpec); empty skips the scenario
	Workloads []string // uniform, skewed
	Replicas  int

	// The workload (see workloadSpec).
	Tenants    int
	HotShare   float64 // share of the hot tenant in the skewed workload
	Rate       float64 // requests per second, Poisson
	Warmup     time.Duration
	Duration   time.Duration // measured: requests due in [Warmup, Warmup+Duration)
	MinGap     time.Duration
	InProgress bool
	// Settle is the pause after emptying the caches before a run: a
	// little more than the gateway's load_metrics interval, so that the
	// run's model sees the replicas idle.
	Settle      time.Duration
	NewShare    float64
	SystemWords [2]int
	UserWords   [2]int
	Turns       [2]int
	Seed        uint64

	// The simulated engines (simulator.Config).
	ReplyTokens     int
	ITL             time.Duration
	TTFT            time.Duration // the engine's fixed cost before the first token, after prefill
	PrefillPerToken time.Duration // per uncached prompt token, one prefill at a time
	BlockSize       int           // tokens per KV block
	KVCacheBlocks   int           // prefix cache size, in blocks
	MaxNumSeqs      int

	// AccessLog, when set, is where the gateway writes its JSON access
	// log: each request's replica, balancing reason and predicted cached
	// share, for studying the policies' decisions.
	AccessLog string
}

// DefaultRoutingConfig is the routing scenario of `make bench`: about two
// minutes. BENCHMARKS.md explains the choice of every figure.
func DefaultRoutingConfig() RoutingConfig {
	return RoutingConfig{
		Policies:        RoutingPolicies,
		Workloads:       []string{WorkloadUniform, WorkloadSkewed},
		Replicas:        4,
		Tenants:         32,
		HotShare:        0.8,
		Rate:            20,
		Warmup:          3 * time.Second,
		Duration:        8 * time.Second,
		MinGap:          4 * time.Second,
		InProgress:      true,
		Settle:          1200 * time.Millisecond,
		NewShare:        0.1,
		SystemWords:     [2]int{3000, 5000},
		UserWords:       [2]int{20, 150},
		Turns:           [2]int{2, 8},
		Seed:            1,
		ReplyTokens:     64,
		ITL:             20 * time.Millisecond,
		TTFT:            20 * time.Millisecond,
		PrefillPerToken: 50 * time.Microsecond,
		BlockSize:       16,
		KVCacheBlocks:   4096,
		MaxNumSeqs:      256,
	}
}

// tinyRoutingConfig is the routing scenario scaled down to seconds for the
// tests: every policy and workload (so that each one's configuration is
// loaded and used), few and short requests; about 7 seconds.
func tinyRoutingConfig() RoutingConfig {
	c := DefaultRoutingConfig()
	c.Tenants = 4
	c.Rate = 20
	c.Warmup = 200 * time.Millisecond
	c.Duration = 400 * time.Millisecond
	c.MinGap = 200 * time.Millisecond
	c.Settle = 0 // only plausibility is checked
	c.SystemWords = [2]int{300, 500}
	c.UserWords = [2]int{5, 20}
	c.ReplyTokens = 4
	c.ITL = 5 * time.Millisecond
	c.TTFT = 2 * time.Millisecond
	c.PrefillPerToken = 10 * time.Microsecond
	c.KVCacheBlocks = 256
	return c
}

// Enabled reports whether the scenario runs at all.
func (c RoutingConfig) Enabled() bool { return len(c.Policies) > 0 && len(c.Workloads) > 0 }

// spec is the workload of one run of the named workload.
func (c RoutingConfig) spec(name string) workloadSpec {
	s := workloadSpec{
		Tenants: c.Tenants, Rate: c.Rate, Span: c.Warmup + c.Duration, MinGap: c.MinGap, InProgress: c.InProgress,
		NewShare: c.NewShare, SystemWords: c.SystemWords, UserWords: c.UserWords, AnswerWords: c.ReplyTokens,
		Turns: c.Turns, Seed: c.Seed,
	}
	if name == WorkloadSkewed {
		s.HotShare = c.HotShare
	}
	return s
}

// simArgs are the command-line flags of each simulator.
func (c RoutingConfig) simArgs() []string {
	return []string{
		"-seed", "1",
		"-tokens", fmt.Sprint(c.ReplyTokens),
		"-itl", c.ITL.String(),
		"-ttft", c.TTFT.String(),
		"-prefill-per-token", c.PrefillPerToken.String(),
		"-block-size", fmt.Sprint(c.BlockSize),
		"-kv-cache-blocks", fmt.Sprint(c.KVCacheBlocks),
		"-max-num-seqs", fmt.Sprint(c.MaxNumSeqs),
	}
}

// floor is the floor of a run's turns on the simulators of c, from empty
// caches, as each run starts.
func (c RoutingConfig) floor() *simulator.Floor {
	return simulator.NewFloor(c.BlockSize, c.TTFT, c.PrefillPerToken)
}

// modelName is the gateway model that runs policy for workload: one model
// per run, so that no run inherits a prefix index, a round-robin turn or a
// breaker from another.
func modelName(workload, policy string) string {
	return "routing-" + workload + "-" + strings.NewReplacer(":", "-", "=", "-").Replace(policy)
}

// validate reports a RoutingConfig that cannot run.
func (c RoutingConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	for _, p := range c.Policies {
		if _, err := parsePolicy(p); err != nil {
			return err
		}
	}
	for _, w := range c.Workloads {
		if w != WorkloadUniform && w != WorkloadSkewed {
			return fmt.Errorf("routing: unknown workload %q (want %s or %s)", w, WorkloadUniform, WorkloadSkewed)
		}
	}
	return c.validateShape()
}

// validateShape reports a workload shape or simulator setting that cannot
// run, whichever scenario uses them.
func (c RoutingConfig) validateShape() error {
	switch {
	case c.Replicas < 1:
		return fmt.Errorf("routing: need at least one replica")
	case c.Tenants < 2:
		return fmt.Errorf("routing: need at least two tenants")
	case c.Rate <= 0 || c.Duration <= 0 || c.Warmup < 0 || c.MinGap < 0:
		return fmt.Errorf("routing: rate and duration must be positive, warm-up and gap not negative")
	case c.HotShare < 0 || c.HotShare >= 1 || c.NewShare < 0 || c.NewShare > 1:
		return fmt.Errorf("routing: hot and new shares must be in [0, 1)")
	case c.SystemWords[0] < 1 || c.SystemWords[1] < c.SystemWords[0] || c.UserWords[0] < 1 ||
		c.UserWords[1] < c.UserWords[0] || c.Turns[0] < 1 || c.Turns[1] < c.Turns[0]:
		return fmt.Errorf("routing: word and turn ranges must be positive and ordered")
	case c.ReplyTokens < 1 || c.BlockSize < 1 || c.KVCacheBlocks < 1:
		return fmt.Errorf("routing: reply tokens, block size and KV cache must be positive")
	case c.PrefillPerToken < 0 || c.PrefillPerToken > time.Second || c.ITL < 0 || c.TTFT < 0:
		return fmt.Errorf("routing: prefill per token must be in [0, 1s], ITL and TTFT not negative")
	}
	return nil
}
