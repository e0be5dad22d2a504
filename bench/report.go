package bench

import (
	"encoding/json"
	"os"
	"time"
)

// Report is the outcome of a run; it is written as JSON and markdown.
type Report struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Command  string    `json:"command"`
	Machine  Machine   `json:"machine"`
	Protocol string    `json:"protocol"`
	Config   struct {
		Rates        []float64 `json:"rates"`
		WarmupS      float64   `json:"warmup_s"`
		DurationS    float64   `json:"duration_s"`
		MaxWorkers   int       `json:"max_workers"`
		MaxInFlight  int       `json:"max_in_flight"`
		ReplyTokens  int       `json:"reply_tokens"`
		Streams      []int     `json:"streams"`
		StreamITLMs  float64   `json:"stream_itl_ms"`
		StreamRampS  float64   `json:"stream_ramp_s"`
		StreamSteady float64   `json:"stream_steady_s"`
		StreamTokens int       `json:"stream_tokens"`
		LargePrompt  int       `json:"large_prompt_bytes,omitempty"`
		LargeWorkers int       `json:"large_workers,omitempty"`
		LargeRate    float64   `json:"large_rate,omitempty"`
		LargeRounds  int       `json:"large_rounds,omitempty"`
	} `json:"config"`
	Idle map[string]IdleMem `json:"idle"` // per proxy, after start and before any load
	// PeakRSSCumulative is set when VmHWM could not be reset between runs:
	// peak RSS then covers everything since the process started.
	PeakRSSCumulative bool     `json:"peak_rss_cumulative,omitempty"`
	Profile           string   `json:"cpu_profile,omitempty"`
	Results           []Result `json:"results"`
	// The routing scenario, when it ran.
	RoutingConfig *routingReportConfig `json:"routing_config,omitempty"`
	Routing       []RoutingResult      `json:"routing,omitempty"`
	// The scale-out scenario, when it ran; ScaleoutSkipped says why it
	// did not when it was asked for (no redis-server).
	ScaleoutConfig  *scaleoutReportConfig `json:"scaleout_config,omitempty"`
	Scaleout        []ScaleoutResult      `json:"scaleout,omitempty"`
	ScaleoutSkipped string                `json:"scaleout_skipped,omitempty"`
	// The overload scenario, when it ran.
	OverloadConfig *overloadReportConfig `json:"overload_config,omitempty"`
	Overload       []OverloadResult      `json:"overload,omitempty"`
	Checks         []Check               `json:"checks"`

	// The ledger scenario, when it ran, and the records its ledger held
	// at the end.
	LedgerConfig  *ledgerReportConfig `json:"ledger_config,omitempty"`
	Ledger        []LedgerResult      `json:"ledger,omitempty"`
	LedgerRecords int64               `json:"ledger_records,omitempty"`

	// The tenants scenario, when it ran.
	TenantsConfig *tenantsReportConfig `json:"tenants_config,omitempty"`
	Tenants       []TenantsResult      `json:"tenants,omitempty"`

	// The batch scenario, when it ran.
	BatchConfig *batchReportConfig `json:"batch_config,omitempty"`
	Batch       []BatchResult      `json:"batch,omitempty"`
	// The doors scenario, when it ran: its load runs, the callgrind
	// counts of each door's pipeline, or why they are missing.
	DoorsConfig       *doorsReportConfig `json:"doors_config,omitempty"`
	Doors             []DoorRun          `json:"doors,omitempty"`
	DoorCounts        []DoorCount        `json:"door_counts,omitempty"`
	DoorsCountSkipped string             `json:"door_counts_skipped,omitempty"`
}

// routingReportConfig is the routing scenario's configuration as the
// report shows it.
type routingReportConfig struct {
	Policies          []string `json:"policies"`
	Workloads         []string `json:"workloads"`
	Replicas          int      `json:"replicas"`
	Tenants           int      `json:"tenants"`
	HotShare          float64  `json:"hot_share"`
	Rate              float64  `json:"rate"`
	WarmupS           float64  `json:"warmup_s"`
	DurationS         float64  `json:"duration_s"`
	MinGapS           float64  `json:"min_gap_s"`
	InProgress        bool     `json:"in_progress"`
	NewShare          float64  `json:"new_share"`
	SystemWords       [2]int   `json:"system_tokens"`
	UserWords         [2]int   `json:"user_tokens"`
	Turns             [2]int   `json:"turns"`
	Seed              uint64   `json:"seed"`
	ReplyTokens       int      `json:"reply_tokens"`
	ITLMs             float64  `json:"itl_ms"`
	TTFTMs            float64  `json:"ttft_ms"`
	PrefillPerTokenUs float64  `json:"prefill_per_token_us"`
	BlockSize         int      `json:"block_size"`
	KVCacheBlocks     int      `json:"kv_cache_blocks"`
	MaxNumSeqs        int      `json:"max_num_seqs"`
	SimArgs           []string `json:"sim_args"`
}

// scaleoutReportConfig is the scale-out scenario's configuration as the
// report shows it: its own settings and the workload's shape.
type scaleoutReportConfig struct {
	Variants    []string `json:"variants"`
	Instances   []int    `json:"instances"`
	Workload    string   `json:"workload"`
	Spread      string   `json:"spread"`
	Rate        float64  `json:"rate"`
	WarmupS     float64  `json:"warmup_s"`
	DurationS   float64  `json:"duration_s"`
	Replicas    int      `json:"replicas"`
	Tenants     int      `json:"tenants"`
	SystemWords [2]int   `json:"system_tokens"`
	Turns       [2]int   `json:"turns"`
	ReplyTokens int      `json:"reply_tokens"`
	Seed        uint64   `json:"seed"`
	SimArgs     []string `json:"sim_args"`
}

// IdleMem is a proxy's resident memory before any load, split into the
// anonymous part (heap, stacks) and the file-backed part (mostly the pages
// of the binary that have been touched).
type IdleMem struct {
	RSSMB  float64 `json:"rss_mb"`
	AnonMB float64 `json:"anon_mb"`
	FileMB float64 `json:"file_mb"`
}

// protocol says how the client talks to each path.
const protocol = "client to proxies: HTTPS (Caddy internal CA, TLS 1.3), HTTP/1.1 keep-alive; " +
	"client to replica and proxies to replica: plain HTTP/1.1"

// newReport starts the report of a run of cfg.
func newReport(cfg Config) *Report {
	r := &Report{Started: time.Now().UTC(), Command: cfg.Command, Machine: readMachine(), Protocol: protocol,
		Idle: map[string]IdleMem{}}
	c := &r.Config
	c.Rates, c.WarmupS, c.DurationS = cfg.Rates, cfg.Warmup.Seconds(), cfg.Duration.Seconds()
	c.MaxWorkers, c.MaxInFlight, c.ReplyTokens = cfg.MaxWorkers, cfg.MaxInFlight, cfg.ReplyTokens
	c.Streams, c.StreamITLMs = cfg.Streams, ms(cfg.StreamITL)
	c.StreamRampS, c.StreamSteady = cfg.StreamRamp.Seconds(), cfg.StreamSteady.Seconds()
	if len(cfg.Streams) > 0 {
		c.StreamTokens = cfg.streamTokens()
	}
	if cfg.LargePrompt > 0 {
		c.LargePrompt, c.LargeRounds = cfg.LargePrompt, cfg.LargeRounds
		if cfg.LargeRate > 0 {
			c.LargeRate = cfg.LargeRate
		} else {
			c.LargeWorkers = cfg.LargeWorkers
		}
	}
	if cfg.Overload.Enabled() {
		r.OverloadConfig = cfg.Overload.report()
	}
	if cfg.Ledger.Enabled() {
		r.LedgerConfig = cfg.Ledger.report(cfg.ReplyTokens)
	}
	if cfg.Tenants.Enabled() {
		r.TenantsConfig = cfg.Tenants.report()
	}
	if cfg.Batch.Enabled() {
		r.BatchConfig = cfg.Batch.report()
	}
	if cfg.Doors.Enabled() {
		r.DoorsConfig = cfg.Doors.report(cfg.ReplyTokens)
	}
	if rc := cfg.Routing; rc.Enabled() {
		r.RoutingConfig = &routingReportConfig{
			Policies: rc.Policies, Workloads: rc.Workloads, Replicas: rc.Replicas, Tenants: rc.Tenants,
			HotShare: rc.HotShare, Rate: rc.Rate, WarmupS: rc.Warmup.Seconds(), DurationS: rc.Duration.Seconds(),
			MinGapS: rc.MinGap.Seconds(), InProgress: rc.InProgress, NewShare: rc.NewShare, SystemWords: rc.SystemWords, UserWords: rc.UserWords,
			Turns: rc.Turns, Seed: rc.Seed, ReplyTokens: rc.ReplyTokens, ITLMs: ms(rc.ITL), TTFTMs: ms(rc.TTFT),
			PrefillPerTokenUs: float64(rc.PrefillPerToken) / float64(time.Microsecond), BlockSize: rc.BlockSize,
			KVCacheBlocks: rc.KVCacheBlocks, MaxNumSeqs: rc.MaxNumSeqs, SimArgs: rc.simArgs(),
		}
	}
	if sc, rc := cfg.Scaleout, cfg.Routing; sc.Enabled() {
		r.ScaleoutConfig = &scaleoutReportConfig{
			Variants: sc.Variants, Instances: sc.Instances, Workload: sc.Workload, Spread: sc.Spread, Rate: sc.Rate,
			WarmupS: sc.Warmup.Seconds(), DurationS: sc.Duration.Seconds(), Replicas: rc.Replicas, Tenants: rc.Tenants,
			SystemWords: rc.SystemWords, Turns: rc.Turns, ReplyTokens: rc.ReplyTokens, Seed: rc.Seed, SimArgs: rc.simArgs(),
		}
	}
	return r
}

// finish records the end of the run and evaluates the targets.
func (r *Report) finish() {
	r.Seconds = time.Since(r.Started).Seconds()
	r.Machine.LoadAfter = loadAvg()
	r.Checks = append(append(r.checks(), r.routingChecks()...), r.scaleoutChecks()...)
	r.Checks = append(r.Checks, r.ledgerChecks()...)
	r.Checks = append(r.Checks, r.tenantsChecks()...)
	r.Checks = append(r.Checks, r.batchChecks()...)
	r.Checks = append(r.Checks, r.doorsChecks()...)
}

// result finds the result of scenario on path.
func (r *Report) result(scenario, path string) *Result {
	for i := range r.Results {
		if r.Results[i].Scenario == scenario && r.Results[i].Path == path {
			return &r.Results[i]
		}
	}
	return nil
}

// WriteJSON writes r, indented, to file.
func (r *Report) WriteJSON(file string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}
