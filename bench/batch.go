package bench

import (
	"fmt"
	"slices"
	"time"
)

// The batch scenario's modes: an online load that rises and falls, alone
// and beside a large batch on the same replicas.
const (
	// BatchOnline: the online load alone, its reference.
	BatchOnline = "online"
	// BatchWith: the same load while a batch of Lines lines runs.
	BatchWith = "batch"
)

// BatchModes are the modes the scenario can run, in run order.
var BatchModes = []string{BatchOnline, BatchWith}

// BatchConfig is the batch scenario: Replicas simulated replicas of
// MaxNumSeqs sequences each, scheduling by priority, a request holding one
// for TTFT plus Tokens-1 inter-token latencies. A critical and a standard
// tenant send streams at Rates (requests per second, the two together),
// one Phase each, in order; in the batch mode a batch of Lines lines, each
// with the same system prompt of PrefixWords words, runs meanwhile.
type BatchConfig struct {
	Modes       []string
	Replicas    int
	MaxNumSeqs  int
	TTFT, ITL   time.Duration
	Tokens      int
	Rates       []float64
	Phase       time.Duration
	Lines       int
	PrefixWords int
	// Share is the batches' share of each model's concurrency (the
	// batches block's share).
	Share float64
	// ClientTimeout is when an online client gives up on a request.
	ClientTimeout time.Duration
}

// DefaultBatchConfig: two replicas of 8 sequences; 40 ms to the first
// token then 40 tokens at 5 ms (about a quarter of a second a request, 64
// requests a second at most); the online load at 15, 45 then 15 requests
// a second for 6 s each; a batch of 4,000 lines sharing a 1,000-word
// system prompt. About 50 s.
func DefaultBatchConfig() BatchConfig {
	return BatchConfig{
		Modes: slices.Clone(BatchModes), Replicas: 2, MaxNumSeqs: 8,
		TTFT: 40 * time.Millisecond, ITL: 5 * time.Millisecond, Tokens: 40,
		Rates: []float64{15, 45, 15}, Phase: 6 * time.Second,
		Lines: 4000, PrefixWords: 1000, Share: 0.5, ClientTimeout: 30 * time.Second,
	}
}

// Enabled reports whether the scenario runs.
func (c BatchConfig) Enabled() bool { return len(c.Modes) > 0 }

// hold is how long one request holds a sequence.
func (c BatchConfig) hold() time.Duration { return c.TTFT + time.Duration(c.Tokens-1)*c.ITL }

// Slots is each replica's max_concurrency at the gateway: twice the
// engine's sequences, so that an online request always finds a slot and
// the engine, scheduling by priority, pre-empts a batch line for it; the
// share keeps the batch's lines within the engine's sequences.
func (c BatchConfig) Slots() int { return 2 * c.MaxNumSeqs }

// window is the online load's whole duration.
func (c BatchConfig) window() time.Duration { return time.Duration(len(c.Rates)) * c.Phase }

func (c BatchConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	for _, m := range c.Modes {
		if !slices.Contains(BatchModes, m) {
			return fmt.Errorf("batch: unknown mode %q (want some of %v)", m, BatchModes)
		}
	}
	switch {
	case c.Replicas <= 0 || c.MaxNumSeqs <= 0 || c.Tokens <= 0 || c.Lines <= 0 || len(c.Rates) == 0:
		return fmt.Errorf("batch: replicas, sequences, tokens, lines and rates must be positive")
	case c.Phase <= 0 || c.ClientTimeout <= 0:
		return fmt.Errorf("batch: durations must be positive")
	case c.Share <= 0 || c.Share > 1:
		return fmt.Errorf("batch: share %g: want (0, 1]", c.Share)
	}
	return nil
}

// simArgs are each simulator's flags: priority scheduling (the batch's
// lines, the lowest class, are pre-empted for online requests), a prefix
// cache whose hits each answer reports, and prefill costing time.
func (c BatchConfig) simArgs() []string {
	return []string{"-ttft", c.TTFT.String(), "-itl", c.ITL.String(), "-tokens", fmt.Sprint(c.Tokens),
		"-max-num-seqs", fmt.Sprint(c.MaxNumSeqs), "-scheduling-policy", "priority",
		"-prompt-tokens-details", "-prefill-per-token", "20us"}
}

// BatchResult is one mode's run.
type BatchResult struct {
	Mode string `json:"mode"`
	// The online tenants' streams: answered, failed, time to first token.
	Online        int     `json:"online_answered"`
	Failed        int     `json:"online_failed"`
	TTFTP50Ms     float64 `json:"online_ttft_p50_ms"`
	TTFTP90Ms     float64 `json:"online_ttft_p90_ms"`
	CriticalP90Ms float64 `json:"critical_ttft_p90_ms"`
	// BatchLines is how many of the batch's lines were answered within
	// the window; BatchFailed how many failed.
	BatchLines  int `json:"batch_lines"`
	BatchFailed int `json:"batch_failed"`
	// IdleUsed is the share of the capacity the online load left idle
	// that the batch's lines used (sequence-seconds).
	IdleUsed float64 `json:"idle_used"`
	// PrefixPrefills counts the batch's answered lines whose prompt the
	// engine did not find cached beyond the first block: each prefilled
	// the shared prefix itself.
	PrefixPrefills int `json:"prefix_prefills"`
}

// batchReportConfig is the scenario's configuration as the report shows
// it.
type batchReportConfig struct {
	Modes       []string  `json:"modes"`
	Replicas    int       `json:"replicas"`
	MaxNumSeqs  int       `json:"max_num_seqs"`
	HoldMs      float64   `json:"hold_ms"`
	Rates       []float64 `json:"rates"`
	PhaseS      float64   `json:"phase_s"`
	Lines       int       `json:"lines"`
	PrefixWords int       `json:"prefix_words"`
	Share       float64   `json:"share"`
	SimArgs     []string  `json:"sim_args"`
}

func (c BatchConfig) report() *batchReportConfig {
	return &batchReportConfig{Modes: c.Modes, Replicas: c.Replicas, MaxNumSeqs: c.MaxNumSeqs, HoldMs: ms(c.hold()),
		Rates: c.Rates, PhaseS: c.Phase.Seconds(), Lines: c.Lines, PrefixWords: c.PrefixWords, Share: c.Share, SimArgs: c.simArgs()}
}
