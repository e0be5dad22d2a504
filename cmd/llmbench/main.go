// Command llmbench measures the replica alone, stock Caddy reverse_proxy
// and llmedge's full path in one run, then llmedge's balancing policies
// over simulated replicas with prefix caches (package bench); it prints a
// markdown report and writes it as JSON; with -write it also updates
// BENCHMARKS.md.
//
//	llmbench -bin bin                      # the default run, about 10 minutes (the doors: about 5)
//	llmbench -bin bin -scenarios routing   # only the routing scenario, about 2 minutes
//	llmbench -bin bin -scenarios scaleout  # round robin and the default policy through 1 and 4 gateway instances on one Redis, about a minute
//	llmbench -bin bin -scenarios overload  # only the overload scenario (classes of work), about 1 minute
//	llmbench -bin bin -scenarios ledger    # only llmedge without and with the usage ledger, about 30 s
//	llmbench -bin bin -scenarios tenants   # only a light user beside a heavy one, gateway queue and engine priority, about 45 s
//	llmbench -bin bin -scenarios doors     # every door at 1 KB to 1 MB against stock Caddy, and callgrind's counts, about 5 minutes
//	llmbench -bin bin -long 30s -write BENCHMARKS.md -cpuprofile bin/llmedge.pprof
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/llmedge/llmedge/bench"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main with its exit code returned.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, out, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "llmbench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "llmbench:", err)
		return 1
	}
	fmt.Fprint(stdout, "\n"+rep.Markdown())
	if out.json != "" {
		if err := rep.WriteJSON(out.json); err != nil {
			fmt.Fprintln(stderr, "llmbench:", err)
			return 1
		}
		fmt.Fprintln(stderr, "llmbench: JSON report in", out.json)
	}
	if out.write != "" {
		if err := rep.UpdateFile(out.write); err != nil {
			fmt.Fprintln(stderr, "llmbench:", err)
			return 1
		}
		fmt.Fprintln(stderr, "llmbench: updated", out.write)
	}
	return 0
}

// outputs are where the report goes besides stdout.
type outputs struct{ json, write string }

// parseFlags reads the command line into a Config.
func parseFlags(args []string, stderr io.Writer) (bench.Config, outputs, error) {
	cfg := bench.DefaultConfig()
	var out outputs
	fs := flag.NewFlagSet("llmbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.BinDir, "bin", "bin", "folder with the llmedge and llmsim binaries")
	rates := fs.String("rates", "500,1000,2000", "open-loop rates, requests per second (empty for none)")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warm-up before each request run")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured part of each request run")
	fs.IntVar(&cfg.MaxWorkers, "workers", cfg.MaxWorkers, "closed-loop workers of the max-throughput run (0 skips it)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", cfg.MaxInFlight, "open-loop cap on outstanding requests; sends beyond it are errors")
	fs.IntVar(&cfg.ReplyTokens, "reply-tokens", cfg.ReplyTokens, "tokens per non-streamed reply")
	streams := fs.String("streams", "1000,2000", "concurrent streams per streams run (empty for none)")
	fs.DurationVar(&cfg.StreamITL, "itl", cfg.StreamITL, "the replica's inter-token latency in streams runs")
	fs.DurationVar(&cfg.StreamRamp, "ramp", cfg.StreamRamp, "time over which streams are opened")
	fs.DurationVar(&cfg.StreamSteady, "steady", cfg.StreamSteady, "measured window with all streams open")
	fs.IntVar(&cfg.LargePrompt, "large-prompt", cfg.LargePrompt, "bytes of the large-prompt scenario's one message (0 skips it)")
	fs.IntVar(&cfg.LargeWorkers, "large-workers", cfg.LargeWorkers, "closed-loop workers of the large-prompt scenario")
	fs.Float64Var(&cfg.LargeRate, "large-rate", cfg.LargeRate, "large-prompt scenario: requests per second, open loop (0: the closed loop of -large-workers)")
	fs.IntVar(&cfg.LargeRounds, "large-rounds", cfg.LargeRounds, "rounds of the large-prompt scenario, the paths in alternating order; its target takes the median ratio")
	long := fs.Duration("long", 0, "set every measured window to this (e.g. 30s) for steadier numbers")
	paths := fs.String("paths", "", "comma-separated subset of replica,caddy,llmedge (default all)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of llmedge (from its admin /debug/pprof) to this file")
	fs.StringVar(&cfg.ProfileScenario, "profile-scenario", cfg.ProfileScenario, "scenario during which -cpuprofile is taken (rate-N, max, streams-N, large-Nk, or a doors run: <door>-<size>-max or -rate, e.g. anthropic-1MB-max)")
	scenarios := fs.String("scenarios", strings.Join(defaultScenarios, ","), "comma-separated scenario groups to run: "+strings.Join(scenarioGroups, ", ")+")")
	rc := &cfg.Routing
	policies := fs.String("routing-policies", strings.Join(rc.Policies, ","), "routing: lb_policy names to compare")
	workloads := fs.String("routing-workloads", strings.Join(rc.Workloads, ","), "routing: workloads, uniform and/or skewed")
	fs.Float64Var(&rc.Rate, "routing-rate", rc.Rate, "routing: requests per second (Poisson arrivals)")
	fs.DurationVar(&rc.Warmup, "routing-warmup", rc.Warmup, "routing: unmeasured start of each run")
	fs.DurationVar(&rc.Duration, "routing-duration", rc.Duration, "routing: measured part of each run")
	fs.IntVar(&rc.Replicas, "routing-replicas", rc.Replicas, "routing: simulated replicas")
	fs.IntVar(&rc.Tenants, "routing-tenants", rc.Tenants, "routing: tenants, each with its own system prompt")
	fs.Float64Var(&rc.HotShare, "routing-hot-share", rc.HotShare, "routing: share of the hot tenant's requests in the skewed workload")
	fs.Uint64Var(&rc.Seed, "routing-seed", rc.Seed, "routing: seed of the workload")
	fs.DurationVar(&rc.PrefillPerToken, "prefill-per-token", rc.PrefillPerToken, "routing: the replicas' prefill time per uncached prompt token")
	fs.IntVar(&rc.KVCacheBlocks, "kv-cache-blocks", rc.KVCacheBlocks, "routing: the replicas' prefix cache, in blocks of 16 tokens")
	fs.StringVar(&rc.AccessLog, "routing-access-log", "", "routing: write the gateway's JSON access log (replica, lb_reason, predicted_cached per request) to this file; scaleout: one file per instance, this name suffixed .<instances>x<instance>")
	so := &cfg.Scaleout
	variants := fs.String("scaleout-variants", "round_robin,prefix_cache+share", "scaleout: lb_policy specs to compare, +share for share_routing on (all: "+strings.Join(bench.ScaleoutVariants, ",")+")")
	instances := fs.String("scaleout-instances", "1,4", "scaleout: gateway instance counts")
	fs.StringVar(&so.Workload, "scaleout-workload", so.Workload, "scaleout: workload, uniform or skewed")
	fs.StringVar(&so.Spread, "scaleout-spread", so.Spread, "scaleout: random (each turn to a random instance) or first (every turn to the first instance, the others idle: a control)")
	fs.Float64Var(&so.Rate, "scaleout-rate", so.Rate, "scaleout: requests per second (Poisson arrivals)")
	fs.DurationVar(&so.Warmup, "scaleout-warmup", so.Warmup, "scaleout: unmeasured start of each run")
	fs.DurationVar(&so.Duration, "scaleout-duration", so.Duration, "scaleout: measured part of each run")
	oc := &cfg.Overload
	overloadModes := fs.String("overload-modes", strings.Join(oc.Modes, ","), "overload: modes to run: "+strings.Join(bench.OverloadModes, ", "))
	fs.Float64Var(&oc.SheddableRate, "overload-rate", oc.SheddableRate, "overload: the sheddable tenant's streams per second")
	fs.DurationVar(&oc.Duration, "overload-duration", oc.Duration, "overload: measured part of each mode's run")
	fs.IntVar(&oc.Reserve, "overload-reserve", oc.Reserve, "overload: slots of the classes model kept from sheddable work (queue reserve)")
	fs.DurationVar(&oc.TTFTTarget, "overload-ttft-target", oc.TTFTTarget, "overload: time to first token within which an answer counts as goodput")
	tc := &cfg.Tenants
	tenantsModes := fs.String("tenants-modes", strings.Join(tc.Modes, ","), "tenants: modes to run: "+strings.Join(bench.TenantsModes, ", "))
	fs.IntVar(&tc.MaxNumSeqs, "tenants-max-num-seqs", tc.MaxNumSeqs, "tenants: the replica's sequences (llmsim -max-num-seqs)")
	fs.IntVar(&tc.HeavyStreams, "tenants-heavy-streams", tc.HeavyStreams, "tenants: the heavy user's streams, back to back")
	fs.DurationVar(&tc.Warmup, "tenants-warmup", tc.Warmup, "tenants: unmeasured start of each mode's run")
	fs.DurationVar(&tc.Duration, "tenants-duration", tc.Duration, "tenants: measured part of each mode's run")
	bc := &cfg.Batch
	batchModes := fs.String("batch-modes", strings.Join(bc.Modes, ","), "batch: modes to run: "+strings.Join(bench.BatchModes, ", "))
	fs.IntVar(&bc.Lines, "batch-lines", bc.Lines, "batch: the batch's lines")
	fs.DurationVar(&bc.Phase, "batch-phase", bc.Phase, "batch: each phase of the online load")
	fs.Float64Var(&bc.Share, "batch-share", bc.Share, "batch: the batches' share of the model's concurrency")
	lc := &cfg.Ledger
	fs.IntVar(&lc.Rounds, "ledger-rounds", lc.Rounds, "ledger: rounds, each running the gateway without and with the ledger")
	fs.Float64Var(&lc.Rate, "ledger-rate", lc.Rate, "ledger: requests per second (open loop)")
	fs.DurationVar(&lc.Warmup, "ledger-warmup", lc.Warmup, "ledger: unmeasured start of each run")
	fs.DurationVar(&lc.Duration, "ledger-duration", lc.Duration, "ledger: measured part of each run")
	dc := &cfg.Doors
	doors := fs.String("doors", strings.Join(dc.Doors, ","), "doors: the doors to run: "+strings.Join(bench.DoorNames(), ", "))
	doorSizes := fs.String("doors-sizes", "1KB,16KB,100KB,1MB", "doors: body sizes (bytes, KB or MB)")
	fs.IntVar(&dc.Workers, "doors-workers", dc.Workers, "doors: closed-loop workers")
	bandwidth := fs.Float64("doors-bandwidth", dc.Bandwidth/1e6, "doors: open loop, MB of request bodies per second (the rate at a size, at most -doors-max-rate)")
	fs.Float64Var(&dc.MaxRate, "doors-max-rate", dc.MaxRate, "doors: open loop, the highest rate, requests per second")
	fs.DurationVar(&dc.Warmup, "doors-warmup", dc.Warmup, "doors: unmeasured start of each run")
	fs.DurationVar(&dc.Duration, "doors-duration", dc.Duration, "doors: measured part of each run (-long leaves it)")
	fs.IntVar(&dc.Rounds, "doors-rounds", dc.Rounds, "doors: closed-loop rounds at each cell, the medians of their ratios reported")
	fs.BoolVar(&dc.Together, "doors-together", dc.Together, "doors: run the closed loop's two proxies at the same time, half the workers each, rather than one after the other")
	fs.StringVar(&dc.Callgrind, "doors-callgrind", "", "doors: the test binary of package bench whose BenchmarkDoors callgrind counts (default: bench.test in -bin; \"off\" skips the counts)")
	fs.StringVar(&out.json, "json", "", "write the JSON report to this file")
	fs.StringVar(&out.write, "write", "", "update the generated sections of the scenario pages under docs/benchmarks beside this file, and its summary of every target (BENCHMARKS.md)")
	if err := fs.Parse(args); err != nil {
		return cfg, out, err
	}
	if fs.NArg() > 0 {
		return cfg, out, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.Rates, err = parseList(*rates, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
		return cfg, out, fmt.Errorf("-rates: %w", err)
	}
	if cfg.Streams, err = parseList(*streams, strconv.Atoi); err != nil {
		return cfg, out, fmt.Errorf("-streams: %w", err)
	}
	if *paths != "" {
		cfg.Paths = strings.Split(*paths, ",")
	}
	if err := selectScenarios(&cfg, *scenarios); err != nil {
		return cfg, out, err
	}
	if cfg.Overload.Enabled() {
		cfg.Overload.Modes, _ = parseList(*overloadModes, func(s string) (string, error) { return s, nil })
	}
	if cfg.Tenants.Enabled() {
		cfg.Tenants.Modes, _ = parseList(*tenantsModes, func(s string) (string, error) { return s, nil })
	}
	if cfg.Batch.Enabled() {
		cfg.Batch.Modes, _ = parseList(*batchModes, func(s string) (string, error) { return s, nil })
	}
	if cfg.Doors.Enabled() {
		cfg.Doors.Doors, _ = parseList(*doors, func(s string) (string, error) { return s, nil })
		if cfg.Doors.Sizes, err = parseList(*doorSizes, bench.ParseSize); err != nil {
			return cfg, out, fmt.Errorf("-doors-sizes: %w", err)
		}
		cfg.Doors.Bandwidth = *bandwidth * 1e6
	}
	if cfg.Routing.Enabled() {
		cfg.Routing.Policies, _ = parseList(*policies, func(s string) (string, error) { return s, nil })
		cfg.Routing.Workloads, _ = parseList(*workloads, func(s string) (string, error) { return s, nil })
	}
	if cfg.Scaleout.Enabled() {
		cfg.Scaleout.Variants, _ = parseList(*variants, func(s string) (string, error) { return s, nil })
		if cfg.Scaleout.Instances, err = parseList(*instances, strconv.Atoi); err != nil {
			return cfg, out, fmt.Errorf("-scaleout-instances: %w", err)
		}
	}
	if *long > 0 {
		cfg = cfg.Long(*long)
	}
	cfg.Command = commandLine(args)
	cfg.Log = stderr
	return cfg, out, nil
}

// scenarioGroups are the values of -scenarios.
var scenarioGroups = []string{"rates", "max", "streams", "large", "doors", "routing", "overload", "ledger", "tenants", "batch", "scaleout"}

// defaultScenarios are the groups `make bench` runs: all of them (the
// scale-out scenario needs redis-server, and reports itself skipped
// without it).
var defaultScenarios = scenarioGroups

// selectScenarios turns off the scenario groups that list leaves out.
func selectScenarios(cfg *bench.Config, list string) error {
	on := map[string]bool{}
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(scenarioGroups, s) {
			return fmt.Errorf("-scenarios: unknown %q (want some of %s)", s, strings.Join(scenarioGroups, ", "))
		}
		on[s] = true
	}
	if len(on) == 0 {
		return fmt.Errorf("-scenarios: none given")
	}
	if !on["rates"] {
		cfg.Rates = nil
	}
	if !on["max"] {
		cfg.MaxWorkers = 0
	}
	if !on["streams"] {
		cfg.Streams = nil
	}
	if !on["large"] {
		cfg.LargePrompt = 0
	}
	if !on["routing"] {
		cfg.Routing.Policies = nil
	}
	// The variants themselves come from -scaleout-variants.
	cfg.Scaleout.Variants = nil
	if on["scaleout"] {
		cfg.Scaleout.Variants = bench.ScaleoutVariants
	}
	if !on["overload"] {
		cfg.Overload.Modes = nil
	}
	if !on["ledger"] {
		cfg.Ledger.Rounds = 0
	}
	if !on["tenants"] {
		cfg.Tenants.Modes = nil
	}
	if !on["batch"] {
		cfg.Batch.Modes = nil
	}
	if !on["doors"] {
		cfg.Doors.Doors = nil
	}
	return nil
}

// commandLine shows args as a shell would need them typed.
func commandLine(args []string) string {
	q := []string{"llmbench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$") {
			a = strconv.Quote(a)
		}
		q = append(q, a)
	}
	return strings.Join(q, " ")
}

// parseList parses a comma-separated list; an empty string is an empty list.
func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := parse(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
