package bench

import (
	"fmt"
	"time"
)

// LedgerConfig is the ledger scenario: the same non-streamed request at
// Rate per second (open loop) through two llmedge gateways alike but for
// the usage ledger, one without and one with `ledger sqlite` (the embedded
// default, its file in the run's folder), Rounds times each, Warmup then
// Duration measured. It measures what the ledger costs the gateway's
// process in CPU per request, the writer's goroutine and SQLite included.
type LedgerConfig struct {
	Rounds   int // 0 skips the scenario
	Rate     float64
	Warmup   time.Duration
	Duration time.Duration
}

// maxLedgerRatio is the target: CPU per request with the ledger at most
// this many times that without (issue 25).
const maxLedgerRatio = 1.03

// groupLedger is the Check group of the ledger target.
const groupLedger = "ledger"

// DefaultLedgerConfig: one round at 1,000 requests/s (the rate of the
// CPU target against stock Caddy), 3 s warm-up and 8 s measured per
// gateway: about 25 s.
func DefaultLedgerConfig() LedgerConfig {
	return LedgerConfig{Rounds: 1, Rate: 1000, Warmup: 3 * time.Second, Duration: 8 * time.Second}
}

func tinyLedgerConfig() LedgerConfig {
	return LedgerConfig{Rounds: 1, Rate: 50, Warmup: 200 * time.Millisecond, Duration: time.Second}
}

// Enabled reports whether the scenario runs.
func (c LedgerConfig) Enabled() bool { return c.Rounds > 0 }

func (c LedgerConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	if c.Rate <= 0 || c.Duration <= 0 || c.Warmup < 0 {
		return fmt.Errorf("ledger: the rate and duration must be positive, the warm-up not negative")
	}
	return nil
}

// ledgerOrder is whether each of the round's two runs has the ledger: the
// rounds alternate which goes first, so that a drift of the machine's
// load over the scenario is charged to both alike.
func ledgerOrder(round int) [2]bool {
	if round%2 == 0 {
		return [2]bool{false, true}
	}
	return [2]bool{true, false}
}

// LedgerResult is one gateway's run in one round.
type LedgerResult struct {
	Round        int     `json:"round"`
	Ledger       bool    `json:"ledger"`
	OK           int     `json:"ok"`
	Errors       int     `json:"errors"`
	ErrorSample  string  `json:"error_sample,omitempty"`
	AchievedRate float64 `json:"achieved_rate"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	// The gateway's CPU (utime + stime) over the measured window.
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUPer1k   float64 `json:"cpu_seconds_per_1k"`
	// OtherCPUCores is the rest of the machine's load in the window.
	OtherCPUCores float64 `json:"other_cpu_cores"`
}

// brief is the progress line of a result.
func (r LedgerResult) brief() string {
	s := fmt.Sprintf("ok=%d errors=%d rate=%.0f/s p50=%.2fms cpu=%.2fs (%.3f s/1k) other=%.2f",
		r.OK, r.Errors, r.AchievedRate, r.P50Ms, r.CPUSeconds, r.CPUPer1k, r.OtherCPUCores)
	if r.ErrorSample != "" {
		s += " first error: " + r.ErrorSample
	}
	return s
}

// ledgerLabel names a run's gateway in the report.
func ledgerLabel(on bool) string {
	if on {
		return "ledger sqlite"
	}
	return "no ledger"
}

// ledgerTotals are the CPU per 1,000 requests over every round of the
// gateway without and with the ledger (the sums' ratio, not the mean of
// the rounds'), and their ratio; 0 where a side has no requests.
func ledgerTotals(rs []LedgerResult) (off, on, ratio float64) {
	var cpu, ok [2]float64
	for _, r := range rs {
		i := 0
		if r.Ledger {
			i = 1
		}
		cpu[i] += r.CPUSeconds
		ok[i] += float64(r.OK)
	}
	if ok[0] > 0 {
		off = cpu[0] * 1000 / ok[0]
	}
	if ok[1] > 0 {
		on = cpu[1] * 1000 / ok[1]
	}
	if off > 0 {
		ratio = on / off
	}
	return off, on, ratio
}

// ledgerRoundRatios are each round's ratio, with / without, for the
// spread.
func ledgerRoundRatios(rs []LedgerResult) []float64 {
	var out []float64
	for _, p := range roundPairs(rs, func(r *LedgerResult) int { return r.Round }, func(r *LedgerResult) bool { return r.Ledger }) {
		if p[0].CPUPer1k > 0 && p[1].CPUPer1k > 0 {
			out = append(out, p[1].CPUPer1k/p[0].CPUPer1k)
		}
	}
	return out
}

// ledgerReportConfig is the scenario's configuration as the report shows
// it.
type ledgerReportConfig struct {
	Rounds      int     `json:"rounds"`
	Rate        float64 `json:"rate"`
	WarmupS     float64 `json:"warmup_s"`
	DurationS   float64 `json:"duration_s"`
	ReplyTokens int     `json:"reply_tokens"`
}

func (c LedgerConfig) report(replyTokens int) *ledgerReportConfig {
	return &ledgerReportConfig{Rounds: c.Rounds, Rate: c.Rate, WarmupS: c.Warmup.Seconds(),
		DurationS: c.Duration.Seconds(), ReplyTokens: replyTokens}
}
