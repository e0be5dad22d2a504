package bench

import "time"

// Result is one scenario run against one path.
type Result struct {
	Scenario    string  `json:"scenario"`
	Path        string  `json:"path"`
	Kind        string  `json:"kind"`            // rate, max, streams or large
	Round       int     `json:"round,omitempty"` // of the large-prompt scenario's
	TargetRate  float64 `json:"target_rate,omitempty"`
	Workers     int     `json:"workers,omitempty"`
	Streams     int     `json:"streams,omitempty"`
	OK          int     `json:"ok"` // requests, or complete streams
	Errors      int     `json:"errors"`
	Overflow    int     `json:"overflow,omitempty"`
	ErrorSample string  `json:"error_sample,omitempty"`
	Seconds     float64 `json:"seconds"` // length of the measured window
	// AchievedRate is successful requests per second, or for streams the
	// tokens received per second in the window.
	AchievedRate float64  `json:"achieved_rate"`
	Latency      *Summary `json:"latency,omitempty"`     // non-streamed requests
	TTFT         *Summary `json:"ttft,omitempty"`        // streams: time to first token
	TokenDelay   *Summary `json:"token_delay,omitempty"` // streams: gap between tokens less the ITL
	Tokens       int      `json:"tokens,omitempty"`      // streams: tokens in the window

	// The process under test: the proxy, or the simulator for the
	// replica path. CPU is counted over the measured window.
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUCores   float64 `json:"cpu_cores"`          // CPU seconds per second of window
	CPUPer1k   float64 `json:"cpu_seconds_per_1k"` // per 1,000 requests, or tokens for streams
	PeakRSSMB  float64 `json:"peak_rss_mb"`        // VmHWM over the run
	// The simulator's and the load generator's CPU in the same window,
	// to show what else was competing for the cores.
	ReplicaCPUSeconds float64 `json:"replica_cpu_seconds"`
	ClientCPUSeconds  float64 `json:"client_cpu_seconds"`
	// OtherCPUCores is the CPU the rest of the machine (other users'
	// processes; interrupts not counted) used in the window, in cores:
	// the noise in this row.
	OtherCPUCores float64 `json:"other_cpu_cores"`
}

// setCPU fills the CPU fields from the process's CPU time in a window of
// length elapsed that served units requests (or tokens).
func (r *Result) setCPU(cpu, elapsed time.Duration, units int) {
	r.CPUSeconds = cpu.Seconds()
	if elapsed > 0 {
		r.CPUCores = cpu.Seconds() / elapsed.Seconds()
	}
	if units > 0 {
		r.CPUPer1k = cpu.Seconds() * 1000 / float64(units)
	}
}

// mb converts bytes to megabytes (MiB).
func mb(b int64) float64 { return float64(b) / (1 << 20) }
