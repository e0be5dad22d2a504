package pool

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// SlowSettings configure the detection of slow replicas: a replica that
// answers, passes its health checks and trips no breaker, but whose time
// to first token or time per output token is much worse than its peers'
// (thermal throttling, a noisy neighbour, a bad GPU). Such a replica is
// weighted down, then ejected for a cool-down and probed back, as Envoy's
// outlier detection does for errors, but on latency. Zero fields take the
// defaults below.
type SlowSettings struct {
	// Disabled turns detection off: every replica keeps its share.
	Disabled bool `json:"disabled,omitempty"`
	// Factor is how many times worse than the median of its peers a
	// replica's latency score must be for it to count as slow. Default 3.
	Factor float64 `json:"factor,omitempty"`
	// MinSamples is how many answers a replica (and each peer it is
	// compared with) must have given before it is judged; a replica judged
	// slow for that many answers in a row is ejected. Default 20.
	MinSamples int `json:"min_samples,omitempty"`
	// HalfLife is how fast old answers stop counting in the figures: an
	// answer weighs half as much after HalfLife. Default 30s.
	HalfLife time.Duration `json:"half_life,omitempty"`
	// Cooldown is how long a first ejection lasts; each ejection that
	// follows another within MaxCooldown of its end lasts twice as long as
	// the one before, up to MaxCooldown. Default 30s.
	Cooldown time.Duration `json:"cooldown,omitempty"`
	// MaxCooldown bounds an ejection. Default 300s.
	MaxCooldown time.Duration `json:"max_cooldown,omitempty"`
	// MaxEjected is the largest share (0..1] of a pool's replicas ejected
	// at once; the last usable replica is never ejected. Default 0.5.
	MaxEjected float64 `json:"max_ejected,omitempty"`
}

// Slow-replica defaults.
const (
	DefaultSlowFactor      = 3.0
	DefaultSlowMinSamples  = 20
	DefaultSlowHalfLife    = 30 * time.Second
	DefaultSlowCooldown    = 30 * time.Second
	DefaultSlowMaxCooldown = 300 * time.Second
	DefaultSlowMaxEjected  = 0.5
)

// Constants of the detection that are not knobs.
const (
	// probeShare is the chance a replica back from an ejection stays a
	// candidate for a request, until its probes have been judged.
	probeShare = 0.25
	// minKeep is the smallest chance a weighted-down replica stays a
	// candidate: it must keep answering to be measured again.
	minKeep = 0.02
	// ttftFloor and tokenFloor are added to both sides of a comparison:
	// differences of a few milliseconds of first token time, or a fraction
	// of one per output token, are noise (a GC pause, a scheduler tick),
	// not a slow replica, however large their ratio.
	ttftFloor  = 5 * time.Millisecond
	tokenFloor = 500 * time.Microsecond
)

// WithDefaults fills the zero fields.
func (s SlowSettings) WithDefaults() SlowSettings {
	if s.Factor <= 0 {
		s.Factor = DefaultSlowFactor
	}
	if s.MinSamples <= 0 {
		s.MinSamples = DefaultSlowMinSamples
	}
	if s.HalfLife <= 0 {
		s.HalfLife = DefaultSlowHalfLife
	}
	if s.Cooldown <= 0 {
		s.Cooldown = DefaultSlowCooldown
	}
	if s.MaxCooldown <= 0 {
		s.MaxCooldown = DefaultSlowMaxCooldown
	}
	if s.MaxCooldown < s.Cooldown {
		s.MaxCooldown = s.Cooldown
	}
	if s.MaxEjected <= 0 {
		s.MaxEjected = DefaultSlowMaxEjected
	}
	return s
}

// Validate reports settings that cannot work.
func (s SlowSettings) Validate() error {
	switch {
	case math.IsNaN(s.Factor) || s.Factor < 0 || (s.Factor > 0 && s.Factor <= 1):
		return fmt.Errorf("slow_replicas factor must be above 1, got %g", s.Factor)
	case math.IsNaN(s.MaxEjected) || s.MaxEjected < 0 || s.MaxEjected > 1:
		return errors.New("slow_replicas max_ejected must be between 0% and 100%")
	case s.MinSamples < 0 || s.HalfLife < 0 || s.Cooldown < 0 || s.MaxCooldown < 0:
		return errors.New("slow_replicas min_samples, half_life, cooldown and max_cooldown must be positive")
	}
	return nil
}

// SlowState is where a replica stands in the detection of slow replicas.
type SlowState uint8

const (
	// SlowOK: not judged slow (or not judged yet); its full share.
	SlowOK SlowState = iota
	// SlowWeighted: judged slow; it stays a candidate for a request with
	// a chance of 1/score.
	SlowWeighted
	// SlowEjected: slow for MinSamples answers in a row; no request until
	// its cool-down ends.
	SlowEjected
	// SlowProbing: back from an ejection, measured afresh on a small share
	// of requests until it is judged again.
	SlowProbing
)

func (s SlowState) String() string {
	switch s {
	case SlowWeighted:
		return "weighted_down"
	case SlowEjected:
		return "ejected"
	case SlowProbing:
		return "probing"
	}
	return "ok"
}

// Slowness is what the detection of slow replicas says of a replica now.
type Slowness struct {
	State SlowState
	// Score is the replica's latency relative to the median of its peers
	// (1: as fast, 3: three times slower); 0 when it is not judged.
	Score float64
	// Keep is the chance that the replica stays a candidate for a request.
	Keep float64
	// Until is when an ejection ends.
	Until time.Time
	// Ejections counts the replica's ejections since it joined the pool.
	Ejections uint64
}

// Slowness returns what the detection says of r at now; SlowOK with Keep
// 1 when the pool does not detect slow replicas. An ejection whose
// cool-down is over reads as probing.
func (r *Replica) Slowness(now time.Time) Slowness {
	v := r.slow.Load()
	if v == nil {
		return Slowness{Keep: 1}
	}
	s := *v
	if s.State == SlowEjected && !now.Before(s.Until) {
		s.State, s.Keep = SlowProbing, probeShare
	}
	return s
}
