// Command llmbench measures the replica alone, stock Caddy reverse_proxy
// and llmedge's full path in one run (package bench), prints a markdown
// report and writes it as JSON; with -write it also updates BENCHMARKS.md.
//
//	llmbench -bin bin                      # the default run, under 3 minutes
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
	long := fs.Duration("long", 0, "set every measured window to this (e.g. 30s) for steadier numbers")
	paths := fs.String("paths", "", "comma-separated subset of replica,caddy,llmedge (default all)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of llmedge (from its admin /debug/pprof) to this file")
	fs.StringVar(&cfg.ProfileScenario, "profile-scenario", cfg.ProfileScenario, "scenario during which -cpuprofile is taken (rate-N, max, streams-N)")
	fs.StringVar(&out.json, "json", "", "write the JSON report to this file")
	fs.StringVar(&out.write, "write", "", "update the generated section of this markdown file (BENCHMARKS.md)")
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
	if *long > 0 {
		cfg = cfg.Long(*long)
	}
	cfg.Command = commandLine(args)
	cfg.Log = stderr
	return cfg, out, nil
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
