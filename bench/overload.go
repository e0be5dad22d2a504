package bench

import (
	"fmt"
	"slices"
	"time"
)

// The overload scenario's modes: how one gateway in front of the same
// replicas treats a critical tenant and a sheddable one sending, together,
// more than the replicas can serve.
const (
	// OverloadClasses: llmedge's classes of work: the tenants' users are
	// critical and sheddable, the model keeps a reserve of slots from
	// sheddable work and refuses it at once while saturated.
	OverloadClasses = "classes"
	// OverloadFIFO: the gateway's wait queue in arrival order, both
	// tenants standard (llmedge before classes, with queue order fifo).
	OverloadFIFO = "fifo"
	// OverloadRoundRobin: no gateway queue nor cap: round robin over the
	// replicas, which queue the excess themselves (a plain balancer).
	OverloadRoundRobin = "round_robin"
	// OverloadAlone: classes, the critical tenant alone: its reference.
	OverloadAlone = "alone"
)

// OverloadModes are the modes the scenario can run, in run order.
var OverloadModes = []string{OverloadAlone, OverloadClasses, OverloadFIFO, OverloadRoundRobin}

// OverloadConfig is the overload scenario: Replicas simulators of
// MaxNumSeqs sequences each, a request holding one for TTFT plus Tokens
// inter-token latencies; a critical tenant of CriticalWorkers interactive
// clients (one stream at a time each, back to back) and a sheddable tenant
// sending SheddableRate streams a second (open loop), for Duration after
// Warmup, once per mode. Goodput is the answers whose first token came
// within TTFTTarget.
type OverloadConfig struct {
	Modes           []string
	Replicas        int
	MaxNumSeqs      int
	TTFT, ITL       time.Duration
	Tokens          int
	CriticalWorkers int
	SheddableRate   float64
	Warmup          time.Duration
	Duration        time.Duration
	TTFTTarget      time.Duration
	// QueueTimeout is the gateway's queue limit; Reserve the slots kept
	// from sheddable work (classes).
	QueueTimeout time.Duration
	Reserve      int
	// ClientTimeout is when a client gives up on a request.
	ClientTimeout time.Duration
}

// DefaultOverloadConfig: 2 replicas of 2 sequences, 400 ms a request:
// about 10 requests a second of capacity; the sheddable tenant sends 30
// (3x), the critical one keeps 2 streams going. About a minute in all.
func DefaultOverloadConfig() OverloadConfig {
	return OverloadConfig{
		Modes:    slices.Clone(OverloadModes),
		Replicas: 2, MaxNumSeqs: 2, TTFT: 200 * time.Millisecond, ITL: 10 * time.Millisecond, Tokens: 20,
		CriticalWorkers: 2, SheddableRate: 30,
		Warmup: 2 * time.Second, Duration: 10 * time.Second,
		TTFTTarget: 500 * time.Millisecond, QueueTimeout: 5 * time.Second, Reserve: 1,
		ClientTimeout: 10 * time.Second,
	}
}

func tinyOverloadConfig() OverloadConfig {
	c := DefaultOverloadConfig()
	c.Modes = []string{OverloadClasses, OverloadFIFO}
	c.Warmup, c.Duration, c.SheddableRate = 200*time.Millisecond, time.Second, 20
	return c
}

// Enabled reports whether the scenario runs.
func (c OverloadConfig) Enabled() bool { return len(c.Modes) > 0 }

// capacity is the replicas' requests a second.
func (c OverloadConfig) capacity() float64 {
	hold := c.TTFT + time.Duration(c.Tokens)*c.ITL
	return float64(c.Replicas*c.MaxNumSeqs) / hold.Seconds()
}

func (c OverloadConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	for _, m := range c.Modes {
		if !slices.Contains(OverloadModes, m) {
			return fmt.Errorf("overload: unknown mode %q (want some of %v)", m, OverloadModes)
		}
	}
	switch {
	case c.Replicas <= 0 || c.MaxNumSeqs <= 0 || c.Tokens <= 0:
		return fmt.Errorf("overload: replicas, sequences and tokens must be positive")
	case c.CriticalWorkers <= 0 || c.SheddableRate <= 0:
		return fmt.Errorf("overload: the tenants need workers and a rate")
	case c.Duration <= 0 || c.TTFTTarget <= 0 || c.QueueTimeout <= 0 || c.ClientTimeout <= 0:
		return fmt.Errorf("overload: durations must be positive")
	case c.Reserve < 0:
		return fmt.Errorf("overload: reserve must not be negative")
	}
	return nil
}

// simArgs are the simulators' flags.
func (c OverloadConfig) simArgs() []string {
	return []string{"-ttft", c.TTFT.String(), "-itl", c.ITL.String(), "-tokens", fmt.Sprint(c.Tokens),
		"-max-num-seqs", fmt.Sprint(c.MaxNumSeqs)}
}

// OverloadClass is one tenant's figures in one mode.
type OverloadClass struct {
	Sent     int `json:"sent"`
	Answered int `json:"answered"`
	// Good are the answers whose first token came within the target.
	Good int `json:"good"`
	// Refused are 429s; Failed every other outcome (timeouts, errors).
	Refused int `json:"refused"`
	Failed  int `json:"failed"`
	// GoodputPerS is Good a second of the measured window.
	GoodputPerS float64 `json:"goodput_per_s"`
	// TTFT of the answers, in ms; RefusalP99Ms the time to a 429.
	TTFTP50Ms    float64 `json:"ttft_p50_ms"`
	TTFTP90Ms    float64 `json:"ttft_p90_ms"`
	RefusalP99Ms float64 `json:"refusal_p99_ms,omitempty"`
	// MaxWaitMs is the longest time to an answer's first token or to a
	// refusal.
	MaxWaitMs float64 `json:"max_wait_ms"`
}

// OverloadResult is one mode's run.
type OverloadResult struct {
	Mode      string        `json:"mode"`
	Seconds   float64       `json:"seconds"`
	Critical  OverloadClass `json:"critical"`
	Sheddable OverloadClass `json:"sheddable"`
}

// brief is the progress line of a result.
func (r OverloadResult) brief() string {
	return fmt.Sprintf("critical good %.1f/s p90 %.0f ms; sheddable good %.1f/s, %d refused, %d failed",
		r.Critical.GoodputPerS, r.Critical.TTFTP90Ms, r.Sheddable.GoodputPerS, r.Sheddable.Refused, r.Sheddable.Failed)
}

// overloadReportConfig is the scenario's configuration as the report shows
// it.
type overloadReportConfig struct {
	Modes           []string `json:"modes"`
	Replicas        int      `json:"replicas"`
	MaxNumSeqs      int      `json:"max_num_seqs"`
	TTFTMs          float64  `json:"ttft_ms"`
	ITLMs           float64  `json:"itl_ms"`
	Tokens          int      `json:"tokens"`
	CapacityPerS    float64  `json:"capacity_per_s"`
	CriticalWorkers int      `json:"critical_workers"`
	SheddableRate   float64  `json:"sheddable_rate"`
	WarmupS         float64  `json:"warmup_s"`
	DurationS       float64  `json:"duration_s"`
	TTFTTargetMs    float64  `json:"ttft_target_ms"`
	QueueTimeoutS   float64  `json:"queue_timeout_s"`
	Reserve         int      `json:"reserve"`
}

func (c OverloadConfig) report() *overloadReportConfig {
	return &overloadReportConfig{Modes: c.Modes, Replicas: c.Replicas, MaxNumSeqs: c.MaxNumSeqs,
		TTFTMs: ms(c.TTFT), ITLMs: ms(c.ITL), Tokens: c.Tokens, CapacityPerS: c.capacity(),
		CriticalWorkers: c.CriticalWorkers, SheddableRate: c.SheddableRate,
		WarmupS: c.Warmup.Seconds(), DurationS: c.Duration.Seconds(), TTFTTargetMs: ms(c.TTFTTarget),
		QueueTimeoutS: c.QueueTimeout.Seconds(), Reserve: c.Reserve}
}
