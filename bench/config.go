package bench

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Config is one benchmark run.
type Config struct {
	BinDir string // holds llmedge and llmsim

	Rates       []float64     // open-loop rates, requests per second
	Warmup      time.Duration // before each rate and max run, not recorded
	Duration    time.Duration // measured part of each rate and max run
	MaxWorkers  int           // closed-loop workers of the max run; 0 skips it
	MaxInFlight int           // open-loop cap on outstanding requests
	ReplyTokens int           // length of non-streamed replies

	Streams      []int         // concurrent streams per streams run
	StreamITL    time.Duration // the replica's inter-token latency in streams runs
	StreamRamp   time.Duration // streams are opened over this time
	StreamSteady time.Duration // then measured for this long with all open

	// LargePrompt is the size in bytes of the one user message of the
	// large-prompt scenario (0 skips it): a closed loop of LargeWorkers
	// sending it, llmedge through its OpenAI door, whose body is carried
	// through to the replica rather than encoded again.
	LargePrompt  int
	LargeWorkers int
	// LargeRate, when positive, sends the large prompt at this many
	// requests per second (open loop) instead of LargeWorkers' closed
	// loop. A closed loop of 100 KB requests saturates a 2-core machine
	// (the client, the simulator and the proxy share it), and each run's
	// CPU per request then depends on how the cores happened to be
	// shared; at a rate below saturation both proxies do the same work.
	LargeRate float64
	// LargeRounds runs the large-prompt scenario this many times, the
	// paths in alternating order, for a ratio to stock Caddy that a drift
	// of the machine (a neighbour, the clock) does not decide: the target
	// takes the median of the rounds' ratios.
	LargeRounds int

	Paths []string // subset of replica, caddy, llmedge; empty means all

	Routing RoutingConfig // the routing scenario; its own processes
	// Scaleout is the scale-out scenario: its own simulators, Redis and
	// gateway instances; the workload's shape is Routing's.
	Scaleout ScaleoutConfig
	// Overload is the overload scenario (classes of work); its own
	// processes.
	Overload OverloadConfig
	// Ledger is the ledger scenario (llmedge without and with the usage
	// ledger); its own processes.
	Ledger LedgerConfig
	// Tenants is the tenants scenario (a light user beside a heavy one,
	// with and without engine priority); its own processes.
	Tenants TenantsConfig
	// Batch is the batch scenario (an online load with and without a
	// batch on the same replicas); its own processes.
	Batch BatchConfig
	// Doors is the doors scenario (every door at every size against
	// stock Caddy); on the request scenarios' processes.
	Doors DoorsConfig

	CPUProfile      string // write a CPU profile of llmedge here...
	ProfileScenario string // ...taken during this scenario

	Command string    // how the run was started, for the report
	Log     io.Writer // progress lines; nil for none
}

// DefaultConfig is what `make bench` runs: about 5 minutes on 2 cores, of
// which 2 for the routing scenario. The scale-out scenario is configured
// but has no variants: it runs only when asked for (about 2 more minutes,
// and it needs redis-server).
func DefaultConfig() Config {
	scaleout := DefaultScaleoutConfig()
	scaleout.Variants = nil
	return Config{
		Rates:           []float64{500, 1000, 2000},
		Warmup:          time.Second,
		Duration:        4 * time.Second,
		MaxWorkers:      16,
		MaxInFlight:     1000,
		ReplyTokens:     16,
		Streams:         []int{1000, 2000},
		StreamITL:       100 * time.Millisecond,
		StreamRamp:      2 * time.Second,
		StreamSteady:    5 * time.Second,
		LargePrompt:     100_000,
		LargeWorkers:    4,
		LargeRate:       200,
		LargeRounds:     3,
		ProfileScenario: "rate-1000",
		Routing:         DefaultRoutingConfig(),
		Scaleout:        scaleout,
		Overload:        DefaultOverloadConfig(),
		Ledger:          DefaultLedgerConfig(),
		Tenants:         DefaultTenantsConfig(),
		Batch:           DefaultBatchConfig(),
		Doors:           DefaultDoorsConfig(),
	}
}

// Long stretches every measured window to d, for steadier numbers.
func (c Config) Long(d time.Duration) Config {
	c.Duration, c.StreamSteady, c.Routing.Duration, c.Scaleout.Duration = d, d, d, d
	c.Overload.Duration = d
	c.Ledger.Duration = d
	c.Tenants.Duration = d
	c.Warmup = max(c.Warmup, 3*time.Second)
	return c
}

// TinyConfig runs every scenario kind in a few seconds; the tests use it.
func TinyConfig(binDir string) Config {
	return Config{
		BinDir:          binDir,
		Rates:           []float64{50},
		Warmup:          200 * time.Millisecond,
		Duration:        time.Second,
		MaxWorkers:      2,
		MaxInFlight:     100,
		ReplyTokens:     8,
		Streams:         []int{10},
		StreamITL:       50 * time.Millisecond,
		StreamRamp:      200 * time.Millisecond,
		StreamSteady:    time.Second,
		LargePrompt:     10_000,
		LargeWorkers:    1,
		LargeRounds:     2,
		ProfileScenario: "rate-50",
		Routing:         tinyRoutingConfig(),
		Overload:        tinyOverloadConfig(),
		Tenants:         tinyTenantsConfig(),
		Doors:           tinyDoorsConfig(),
	}
}

// maxLargePrompt keeps the large prompt's body within the gateway's
// max_body_size in the benchmark's Caddyfile.
const maxLargePrompt = 4 << 20

// scenario is one load shape, run against every path.
type scenario struct {
	Name    string
	Kind    string // "rate", "max", "streams" or "large"
	Rate    float64
	Workers int
	Streams int
	Round   int // of the large-prompt scenario's rounds, from 1; 0 for the others
	// Warmup and Duration, when Duration is set, replace the Config's
	// (the doors scenario has its own).
	Warmup, Duration time.Duration
	// PreciseCPU counts the process's CPU from its threads' schedstat (ns)
	// rather than utime+stime (10 ms ticks): the doors scenario's runs
	// of large bodies hold too few ticks.
	PreciseCPU bool
}

// window is s's warm-up and measured window under c.
func (s scenario) window(c Config) (warmup, dur time.Duration) {
	if s.Duration > 0 {
		return s.Warmup, s.Duration
	}
	return c.Warmup, c.Duration
}

// scenarios lists c's scenarios in run order.
func (c Config) scenarios() []scenario {
	var s []scenario
	for _, r := range c.Rates {
		s = append(s, scenario{Name: fmt.Sprintf("rate-%g", r), Kind: "rate", Rate: r})
	}
	if c.MaxWorkers > 0 {
		s = append(s, scenario{Name: "max", Kind: "max", Workers: c.MaxWorkers})
	}
	for _, n := range c.Streams {
		s = append(s, scenario{Name: fmt.Sprintf("streams-%d", n), Kind: "streams", Streams: n})
	}
	for round := 1; c.LargePrompt > 0 && round <= c.LargeRounds; round++ {
		s = append(s, scenario{Name: c.largeName(), Kind: "large", Workers: c.LargeWorkers, Round: round})
	}
	return s
}

// largeName names the large-prompt scenario by its prompt's size.
func (c Config) largeName() string {
	if c.LargePrompt%1000 == 0 {
		return fmt.Sprintf("large-%dk", c.LargePrompt/1000)
	}
	return fmt.Sprintf("large-%db", c.LargePrompt)
}

// streamTokens is the reply length that keeps a stream opened at the end
// of the ramp going until the measured window is over.
func (c Config) streamTokens() int {
	return int((c.StreamRamp+c.StreamSteady)/c.StreamITL) + 2
}

// paths returns the paths to run, in order.
func (c Config) paths() []string {
	if len(c.Paths) == 0 {
		return []string{PathReplica, PathCaddy, PathLLMEdge}
	}
	return c.Paths
}

// validate reports a Config that cannot run.
func (c Config) validate() error {
	switch {
	case c.BinDir == "":
		return fmt.Errorf("no binary folder")
	case c.Duration <= 0 || c.Warmup < 0:
		return fmt.Errorf("duration must be positive and warm-up not negative")
	case c.MaxInFlight <= 0:
		return fmt.Errorf("max in-flight must be positive")
	case c.LargePrompt < 0 || c.LargePrompt > maxLargePrompt:
		return fmt.Errorf("large prompt %d bytes: must be within 0..%d", c.LargePrompt, maxLargePrompt)
	case c.LargePrompt > 0 && c.LargeWorkers <= 0:
		return fmt.Errorf("the large-prompt scenario needs workers")
	case c.LargePrompt > 0 && c.LargeRounds <= 0:
		return fmt.Errorf("the large-prompt scenario needs at least one round")
	case len(c.Streams) > 0 && (c.StreamITL <= 0 || c.StreamSteady <= 0 || c.StreamRamp < 0):
		return fmt.Errorf("streams need a positive ITL and steady window")
	case len(c.scenarios()) == 0 && !c.Routing.Enabled() && !c.Scaleout.Enabled() && !c.Overload.Enabled() && !c.Ledger.Enabled() && !c.Tenants.Enabled() && !c.Doors.Enabled() && !c.Batch.Enabled():
		return fmt.Errorf("no scenario to run")
	}
	if err := c.Routing.validate(); err != nil {
		return err
	}
	if err := c.Scaleout.validate(c.Routing); err != nil {
		return err
	}
	if err := c.Overload.validate(); err != nil {
		return err
	}
	if err := c.Ledger.validate(); err != nil {
		return err
	}
	if err := c.Batch.validate(); err != nil {
		return err
	}
	if err := c.Tenants.validate(); err != nil {
		return err
	}
	if err := c.Doors.validate(); err != nil {
		return err
	}
	for _, r := range c.Rates {
		if r <= 0 {
			return fmt.Errorf("rate %g: must be positive", r)
		}
	}
	for _, n := range c.Streams {
		if n <= 0 {
			return fmt.Errorf("streams %d: must be positive", n)
		}
	}
	for _, p := range c.Paths {
		if p != PathReplica && p != PathCaddy && p != PathLLMEdge {
			return fmt.Errorf("unknown path %q", p)
		}
	}
	return nil
}

// paths is the order in which s runs the paths: an even round of the
// large-prompt scenario runs them backwards, so that each path goes first
// as often as last.
func (s scenario) paths(all []string) []string {
	if s.Round%2 == 1 || s.Round == 0 {
		return all
	}
	rev := slices.Clone(all)
	slices.Reverse(rev)
	return rev
}

// label names s in progress lines: with its round, when it has rounds.
func (s scenario) label() string {
	if s.Round == 0 {
		return s.Name
	}
	return fmt.Sprintf("%s#%d", s.Name, s.Round)
}
