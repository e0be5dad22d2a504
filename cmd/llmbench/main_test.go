package main

import (
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/llmedge/llmedge/bench"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", nil, false},
		{"1000", []int{1000}, false},
		{"1000, 2000,", []int{1000, 2000}, false},
		{"10,x", nil, true},
	}
	for _, tt := range tests {
		got, err := parseList(tt.in, strconv.Atoi)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseList(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, out, err := parseFlags([]string{"-rates", "", "-streams", "5", "-long", "20s", "-paths", "caddy,llmedge", "-write", "B.md"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rates) != 0 || !slices.Equal(cfg.Streams, []int{5}) || cfg.Duration != 20*time.Second ||
		cfg.StreamSteady != 20*time.Second || !slices.Equal(cfg.Paths, []string{"caddy", "llmedge"}) || out.write != "B.md" {
		t.Errorf("parsed %+v, %+v", cfg, out)
	}
	if _, _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Error("a stray argument was accepted")
	}
}

func TestParseFlagsScenarios(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(bench.Config) bool
		wantErr bool
	}{
		{"default runs everything, scaleout through one and four instances", nil, func(c bench.Config) bool {
			return len(c.Rates) == 3 && c.MaxWorkers > 0 && len(c.Streams) == 2 && c.Routing.Enabled() &&
				slices.Equal(c.Routing.Policies, bench.RoutingPolicies) && c.Scaleout.Enabled() &&
				slices.Equal(c.Scaleout.Variants, []string{"round_robin", "prefix_cache+share"}) &&
				slices.Equal(c.Scaleout.Instances, []int{1, 4}) && c.Batch.Enabled() && c.Tenants.Enabled() &&
				c.Ledger.Enabled() && c.Doors.Enabled() && slices.Equal(c.Doors.Doors, bench.DoorNames()) &&
				slices.Equal(c.Doors.Sizes, bench.DoorSizes)
		}, false},
		{"doors only, its settings", []string{"-scenarios", "doors", "-doors", "chat,anthropic", "-doors-sizes", "1KB,2048,1MB",
			"-doors-workers", "4", "-doors-bandwidth", "10", "-doors-duration", "3s", "-doors-callgrind", "off", "-long", "15s"}, func(c bench.Config) bool {
			d := c.Doors
			return len(c.Rates) == 0 && !c.Routing.Enabled() && !c.Ledger.Enabled() && slices.Equal(d.Doors, []string{"chat", "anthropic"}) &&
				slices.Equal(d.Sizes, []int{1 << 10, 2048, 1 << 20}) && d.Workers == 4 && d.Bandwidth == 10e6 &&
				d.Duration == 3*time.Second && d.Callgrind == "off"
		}, false},
		{"no doors", []string{"-scenarios", "rates"}, func(c bench.Config) bool {
			return !c.Doors.Enabled()
		}, false},
		{"bad door size", []string{"-scenarios", "doors", "-doors-sizes", "1KB,big"}, nil, true},
		{"ledger only, its settings", []string{"-scenarios", "ledger", "-ledger-rounds", "3", "-ledger-rate", "500", "-long", "15s"}, func(c bench.Config) bool {
			l := c.Ledger
			return len(c.Rates) == 0 && !c.Routing.Enabled() && !c.Overload.Enabled() && l.Rounds == 3 && l.Rate == 500 &&
				l.Duration == 15*time.Second && l.Warmup == 3*time.Second
		}, false},
		{"no ledger", []string{"-scenarios", "rates"}, func(c bench.Config) bool {
			return !c.Ledger.Enabled()
		}, false},
		{"scaleout only, its defaults", []string{"-scenarios", "scaleout"}, func(c bench.Config) bool {
			s := c.Scaleout
			return len(c.Rates) == 0 && !c.Routing.Enabled() && s.Enabled() && slices.Equal(s.Variants, []string{"round_robin", "prefix_cache+share"}) &&
				slices.Equal(s.Instances, []int{1, 4}) && s.Workload == bench.WorkloadUniform && s.Duration == 8*time.Second
		}, false},
		{"scaleout settings", []string{"-scenarios", "routing,scaleout", "-scaleout-instances", "1,2", "-scaleout-variants", "round_robin,prefix_cache+share",
			"-scaleout-rate", "10", "-scaleout-workload", "skewed", "-scaleout-spread", "first", "-scaleout-warmup", "1s", "-scaleout-duration", "4s"}, func(c bench.Config) bool {
			s := c.Scaleout
			return c.Routing.Enabled() && slices.Equal(s.Instances, []int{1, 2}) && slices.Equal(s.Variants, []string{"round_robin", "prefix_cache+share"}) &&
				s.Rate == 10 && s.Workload == bench.WorkloadSkewed && s.Spread == bench.SpreadFirst && s.Warmup == time.Second && s.Duration == 4*time.Second
		}, false},
		{"-long stretches scaleout too", []string{"-scenarios", "scaleout", "-long", "20s"}, func(c bench.Config) bool {
			return c.Scaleout.Duration == 20*time.Second
		}, false},
		{"scaleout settings without the scenario", []string{"-scenarios", "rates", "-scaleout-instances", "1,2"}, func(c bench.Config) bool {
			return !c.Scaleout.Enabled()
		}, false},
		{"bad instance count", []string{"-scenarios", "scaleout", "-scaleout-instances", "1,two"}, nil, true},
		{"routing only", []string{"-scenarios", "routing"}, func(c bench.Config) bool {
			return len(c.Rates) == 0 && c.MaxWorkers == 0 && len(c.Streams) == 0 && c.Routing.Enabled()
		}, false},
		{"no routing", []string{"-scenarios", "rates,max,streams"}, func(c bench.Config) bool {
			return len(c.Rates) == 3 && !c.Routing.Enabled()
		}, false},
		{"routing settings", []string{"-scenarios", "routing", "-routing-policies", "prefix_cache,prefix_cache:load_factor=2",
			"-routing-workloads", "skewed", "-routing-rate", "24", "-prefill-per-token", "100us", "-long", "20s"}, func(c bench.Config) bool {
			r := c.Routing
			return slices.Equal(r.Policies, []string{"prefix_cache", "prefix_cache:load_factor=2"}) &&
				slices.Equal(r.Workloads, []string{"skewed"}) && r.Rate == 24 && r.PrefillPerToken == 100*time.Microsecond &&
				r.Duration == 20*time.Second
		}, false},
		{"unknown scenario", []string{"-scenarios", "rates,bursts"}, nil, true},
		{"no scenario", []string{"-scenarios", ","}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %t", err, tt.wantErr)
			}
			if err == nil && !tt.check(cfg) {
				t.Errorf("parsed %+v", cfg)
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	if got, want := commandLine([]string{"-rates", "", "-write", "B.md"}), `llmbench -rates "" -write B.md`; got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}
