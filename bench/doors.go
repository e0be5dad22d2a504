package bench

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// DoorsConfig is the doors scenario: every door of llmedge at every body
// size against stock Caddy's reverse_proxy of the same body to the same
// replica, closed loop at saturation and open loop at a fixed rate, and
// each door's pipeline counted in instructions per request (callgrind).
// It runs on the request scenarios' simulator and proxies.
type DoorsConfig struct {
	Doors []string // names of doorList's doors; empty skips the scenario
	Sizes []int    // body sizes, bytes
	// Workers is the closed loop's concurrency: enough to saturate the
	// machine at every size.
	Workers int
	// Bandwidth is the open loop's request bytes per second: the rate at
	// a size is Bandwidth / size, at most MaxRate, so that every size
	// runs below saturation with enough requests to count.
	Bandwidth float64
	MaxRate   float64
	Warmup    time.Duration
	Duration  time.Duration
	// Rounds is how many times the closed loop's pair runs at each cell;
	// the ratios reported are the medians of the rounds' (0 means 1). A
	// run of 2 s on a shared 2-core machine moves by ±10% from one run to
	// the next; the median of three rarely does.
	Rounds int
	// Together runs the closed loop's pair at the same time, each proxy
	// with half the workers, rather than one after the other, so that
	// both run on the machine as it is in the same seconds: back to back,
	// the ratio of one round also carries whatever changed between the
	// two runs. An experiment, not the default: on the 2-core reference
	// machine it narrowed the rounds' spread little and raised the
	// ratios, the two proxies slowing each other down
	// (docs/benchmarks/doors.md).
	Together bool
	// Callgrind is the test binary of this package (go test -c
	// ./bench/), whose BenchmarkDoors callgrind counts; empty takes
	// bench.test in the binary folder, "off" skips the counts, as does a
	// missing valgrind or binary.
	Callgrind string
}

// DefaultDoorsConfig is the scenario of `make bench`: 6 doors × 4 sizes
// × 8 runs of 2.8 s (the closed loop's pair three times, the open
// loop's once), about 9 minutes, then about a minute of callgrind.
func DefaultDoorsConfig() DoorsConfig {
	return DoorsConfig{
		Doors:     DoorNames(),
		Sizes:     DoorSizes,
		Workers:   8,
		Bandwidth: 20e6,
		MaxRate:   500,
		Warmup:    500 * time.Millisecond,
		Duration:  2 * time.Second,
		Rounds:    5, // one round of a cell moves by ±0.15 in ratio: the median of five, not of three
	}
}

// tinyDoorsConfig runs two doors at two sizes in a few seconds.
func tinyDoorsConfig() DoorsConfig {
	return DoorsConfig{Doors: []string{"chat", "anthropic"}, Sizes: []int{1 << 10, 16 << 10}, Workers: 2,
		Bandwidth: 1e6, MaxRate: 50, Warmup: 200 * time.Millisecond, Duration: 500 * time.Millisecond}
}

// Enabled reports whether the scenario runs.
func (c DoorsConfig) Enabled() bool { return len(c.Doors) > 0 && len(c.Sizes) > 0 }

// rounds is how many times the closed loop's pair runs at a cell.
func (c DoorsConfig) rounds() int { return max(1, c.Rounds) }

// rate is the open loop's rate at size, in whole requests per second.
func (c DoorsConfig) rate(size int) float64 {
	return max(1, math.Round(min(c.MaxRate, c.Bandwidth/float64(size))))
}

// validate reports a scenario that cannot run.
func (c DoorsConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	switch {
	case c.Workers <= 0:
		return fmt.Errorf("doors: workers must be positive")
	case c.Bandwidth <= 0 || c.MaxRate <= 0:
		return fmt.Errorf("doors: bandwidth and maximum rate must be positive")
	case c.Duration <= 0 || c.Warmup < 0:
		return fmt.Errorf("doors: duration must be positive and warm-up not negative")
	case c.Rounds < 0:
		return fmt.Errorf("doors: rounds must not be negative")
	case c.Together && c.Workers < 2:
		return fmt.Errorf("doors: together needs at least 2 workers, half for each proxy")
	}
	for _, name := range c.Doors {
		if _, ok := findDoor(name); !ok {
			return fmt.Errorf("doors: unknown door %q (want some of %v)", name, DoorNames())
		}
		for _, size := range c.Sizes {
			if size > maxLargePrompt {
				return fmt.Errorf("doors: size %d: at most %d (the gateway's max_body_size in the benchmark)", size, maxLargePrompt)
			}
			if _, err := doorBody(name, benchModel, size); err != nil {
				return fmt.Errorf("doors: %w", err)
			}
		}
	}
	return nil
}

// doorsReportConfig is the scenario's configuration as the report shows
// it.
type doorsReportConfig struct {
	Doors       []string  `json:"doors"`
	Sizes       []int     `json:"sizes"`
	Workers     int       `json:"workers"`
	Rates       []float64 `json:"rates"`  // the open loop's, by size
	Rounds      int       `json:"rounds"` // the closed loop's
	Together    bool      `json:"together,omitempty"`
	WarmupS     float64   `json:"warmup_s"`
	DurationS   float64   `json:"duration_s"`
	ReplyTokens int       `json:"reply_tokens"`
	Turns       []int     `json:"turns"` // messages besides the system prompt, by size
}

func (c DoorsConfig) report(replyTokens int) *doorsReportConfig {
	rc := &doorsReportConfig{Doors: c.Doors, Sizes: c.Sizes, Workers: c.Workers, Rounds: c.rounds(), Together: c.Together, WarmupS: c.Warmup.Seconds(),
		DurationS: c.Duration.Seconds(), ReplyTokens: replyTokens}
	for _, s := range c.Sizes {
		rc.Rates = append(rc.Rates, c.rate(s))
		rc.Turns = append(rc.Turns, conversationTurns(s))
	}
	return rc
}

// DoorRun is one load run of the doors scenario: a door at a size, on
// one path.
type DoorRun struct {
	Door  string `json:"door"`
	Size  int    `json:"size"`
	Round int    `json:"round"` // of the closed loop's rounds, from 0
	Result
}

// DoorCount is a door's pipeline at a size counted by callgrind.
type DoorCount struct {
	Door         string  `json:"door"`
	Size         int     `json:"size"`
	Iterations   int     `json:"iterations"`
	Instructions float64 `json:"instructions_per_request"`
}

// countIterations is how many requests callgrind counts at size (beyond
// the run of one it subtracts): fewer for large bodies, whose count is
// steady and whose run under valgrind is long.
func countIterations(size int) int { return min(200, max(10, (4<<20)/size)) }

// callgrindTools finds valgrind and the benchmark binary, or says why
// the counts are skipped.
func (c DoorsConfig) callgrindTools(binDir string) (valgrind, testBin, skipped string) {
	if c.Callgrind == "off" {
		return "", "", "the counts were turned off (-doors-callgrind off)"
	}
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		return "", "", "valgrind is not installed here: no instruction counts"
	}
	testBin = c.Callgrind
	if testBin == "" {
		testBin = filepath.Join(binDir, doorsTestBinary)
	}
	if _, err := exec.LookPath(testBin); err != nil {
		return "", "", fmt.Sprintf("no benchmark binary %s (make bench builds it: go test -c -o %s ./bench/): no instruction counts", testBin, testBin)
	}
	return valgrind, testBin, ""
}

// doorsTestBinary is the benchmark binary's name in the binary folder.
const doorsTestBinary = "bench.test"

// doorCell is one door at one size.
type doorCell struct {
	door door
	size int
}

// cells are the scenario's doors and sizes in run order: by size, then
// by door.
func (c DoorsConfig) cells() []doorCell {
	var out []doorCell
	for _, s := range c.Sizes {
		for _, d := range doorList {
			if slices.Contains(c.Doors, d.Name) {
				out = append(out, doorCell{d, s})
			}
		}
	}
	return out
}
