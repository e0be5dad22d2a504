package bench

import (
	"fmt"
	"slices"
	"time"
)

// The tenants scenario's modes: a light user's wait for its first token
// beside a heavy user who keeps one replica saturated.
const (
	// TenantsAlone: the light user alone, its reference.
	TenantsAlone = "alone"
	// TenantsQueue: beside the heavy user, the gateway's fair queue only
	// (max_concurrency at the engine's sequences, engine priority off):
	// the light request waits for the next slot to free.
	TenantsQueue = "queue"
	// TenantsEngine: beside the heavy user, engine_priority fair and no
	// gateway cap: the engine (llmsim -scheduling-policy priority) holds
	// the queue and preempts the heavy user's sequences for the light
	// user's request.
	TenantsEngine = "engine"
)

// TenantsModes are the modes the scenario can run, in run order.
var TenantsModes = []string{TenantsAlone, TenantsQueue, TenantsEngine}

// TenantsConfig is the tenants scenario: one simulated replica of
// MaxNumSeqs sequences scheduling by priority, a request holding one for
// TTFT plus Tokens-1 inter-token latencies; a heavy user keeps
// HeavyStreams streams going back to back, a light user sends one stream
// at a time, LightGap apart, and its times to first token are measured,
// for Duration after Warmup, once per mode.
type TenantsConfig struct {
	Modes        []string
	MaxNumSeqs   int
	TTFT, ITL    time.Duration
	Tokens       int
	HeavyStreams int
	LightGap     time.Duration
	Warmup       time.Duration
	Duration     time.Duration
	// ClientTimeout is when a client gives up on a request.
	ClientTimeout time.Duration
}

// DefaultTenantsConfig: 4 sequences, 40 ms to the first token then 40
// tokens at 5 ms (about a quarter of a second a request); 24 heavy
// streams (6 for each sequence), the light user every 100 ms. About 45 s.
func DefaultTenantsConfig() TenantsConfig {
	return TenantsConfig{
		Modes:      slices.Clone(TenantsModes),
		MaxNumSeqs: 4, TTFT: 40 * time.Millisecond, ITL: 5 * time.Millisecond, Tokens: 40,
		HeavyStreams: 24, LightGap: 100 * time.Millisecond,
		Warmup: 2 * time.Second, Duration: 12 * time.Second, ClientTimeout: 30 * time.Second,
	}
}

func tinyTenantsConfig() TenantsConfig {
	c := DefaultTenantsConfig()
	c.HeavyStreams, c.Warmup, c.Duration = 8, 300*time.Millisecond, 1500*time.Millisecond
	return c
}

// Enabled reports whether the scenario runs.
func (c TenantsConfig) Enabled() bool { return len(c.Modes) > 0 }

// hold is how long one request holds a sequence.
func (c TenantsConfig) hold() time.Duration { return c.TTFT + time.Duration(c.Tokens-1)*c.ITL }

func (c TenantsConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	for _, m := range c.Modes {
		if !slices.Contains(TenantsModes, m) {
			return fmt.Errorf("tenants: unknown mode %q (want some of %v)", m, TenantsModes)
		}
	}
	switch {
	case c.MaxNumSeqs <= 0 || c.Tokens <= 0 || c.HeavyStreams <= 0:
		return fmt.Errorf("tenants: sequences, tokens and heavy streams must be positive")
	case c.Duration <= 0 || c.ClientTimeout <= 0 || c.LightGap < 0:
		return fmt.Errorf("tenants: durations must be positive")
	}
	return nil
}

// simArgs are the simulator's flags: it schedules by priority in every
// mode (the queue mode sends none, so it runs first come, first served).
func (c TenantsConfig) simArgs() []string {
	return []string{"-ttft", c.TTFT.String(), "-itl", c.ITL.String(), "-tokens", fmt.Sprint(c.Tokens),
		"-max-num-seqs", fmt.Sprint(c.MaxNumSeqs), "-scheduling-policy", "priority"}
}

// TenantsResult is one mode's run: the light user's figures, and how
// many of the heavy user's requests were answered.
type TenantsResult struct {
	Mode  string `json:"mode"`
	Light int    `json:"light_answered"`
	// Failed counts the light user's requests without an answer.
	Failed    int     `json:"light_failed"`
	TTFTP50Ms float64 `json:"light_ttft_p50_ms"`
	TTFTP90Ms float64 `json:"light_ttft_p90_ms"`
	// DurationP50Ms is the light user's whole request, first byte sent to
	// last byte read.
	DurationP50Ms float64 `json:"light_duration_p50_ms"`
	HeavyPerS     float64 `json:"heavy_answered_per_s"`
	// Preemptions is the engine's count over the mode's run.
	Preemptions int64 `json:"preemptions"`
}

// tenantsReportConfig is the scenario's configuration as the report
// shows it.
type tenantsReportConfig struct {
	Modes        []string `json:"modes"`
	MaxNumSeqs   int      `json:"max_num_seqs"`
	TTFTMs       float64  `json:"ttft_ms"`
	ITLMs        float64  `json:"itl_ms"`
	Tokens       int      `json:"tokens"`
	HoldMs       float64  `json:"hold_ms"`
	HeavyStreams int      `json:"heavy_streams"`
	LightGapMs   float64  `json:"light_gap_ms"`
	WarmupS      float64  `json:"warmup_s"`
	DurationS    float64  `json:"duration_s"`
}

func (c TenantsConfig) report() *tenantsReportConfig {
	return &tenantsReportConfig{Modes: c.Modes, MaxNumSeqs: c.MaxNumSeqs, TTFTMs: ms(c.TTFT), ITLMs: ms(c.ITL),
		Tokens: c.Tokens, HoldMs: ms(c.hold()), HeavyStreams: c.HeavyStreams, LightGapMs: ms(c.LightGap),
		WarmupS: c.Warmup.Seconds(), DurationS: c.Duration.Seconds()}
}
